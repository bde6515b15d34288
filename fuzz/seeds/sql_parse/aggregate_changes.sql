-- Checks aggregates, DISTINCT, HAVING and ORDER BY ... LIMIT under
-- changes, phase by phase: MIN/MAX fall back to the next value when the
-- extreme leaves, COUNT(DISTINCT) drops a value only with its last row, a
-- group crosses a HAVING threshold both ways, and a top-2 refills from the
-- rows below it.
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, v INT);
INSERT INTO t VALUES (1, 'a', 5), (2, 'a', 9), (3, 'a', 9), (4, 'b', 1), (5, 'c', 7);

CREATE MATERIALIZED VIEW stats AS
SELECT g, MIN(v) AS lo, MAX(v) AS hi, COUNT(DISTINCT v) AS values_, COUNT(*) AS n FROM t GROUP BY g;
CREATE MATERIALIZED VIEW big_groups AS SELECT g, SUM(v) AS total FROM t GROUP BY g HAVING SUM(v) >= 10;
CREATE MATERIALIZED VIEW distinct_values AS SELECT DISTINCT v FROM t;
CREATE MATERIALIZED VIEW top2 AS SELECT id, v FROM t ORDER BY v DESC, id LIMIT 2;
-- run
DELETE FROM t WHERE id = 2;
UPDATE t SET v = 20 WHERE id = 4;
-- run
DELETE FROM t WHERE id IN (3, 4);
