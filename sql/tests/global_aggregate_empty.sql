-- Checks a global aggregate (no GROUP BY) over no rows: one row with
-- COUNT 0 and NULL for the others; the same with a WHERE that keeps
-- nothing; and a grouped aggregate over no rows, which has no rows.
-- Then rows arrive (the default row goes away) and all leave again.
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE TABLE never (id INT PRIMARY KEY, v INT);

CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s, MIN(v) AS lo, AVG(v) AS mean FROM t;
CREATE MATERIALIZED VIEW total_filtered AS SELECT COUNT(*) AS n, MAX(v) AS hi FROM t WHERE v > 100;
CREATE MATERIALIZED VIEW grouped AS SELECT v, COUNT(*) AS n FROM t GROUP BY v;
CREATE MATERIALIZED VIEW never_total AS SELECT COUNT(*) AS n, SUM(v) AS s FROM never;
-- run
INSERT INTO t VALUES (1, 10), (2, 20), (3, NULL);
-- run
DELETE FROM t WHERE v IS NULL OR v <= 20;
