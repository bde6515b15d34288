-- Checks views defined over views: a plain view inlined into a
-- materialized one, a materialized view read by another, a chain of three,
-- and a view that reads a view twice (a self join).
CREATE TABLE t (id INT PRIMARY KEY, grp TEXT, v INT);
INSERT INTO t VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 3), (4, 'c', 4);

CREATE VIEW positive AS SELECT id, grp, v FROM t WHERE v > 1;
CREATE MATERIALIZED VIEW per_group AS SELECT grp, SUM(v) AS total FROM positive GROUP BY grp;
CREATE VIEW big_groups AS SELECT grp FROM per_group WHERE total >= 3;
CREATE MATERIALIZED VIEW big_group_rows AS SELECT t.id FROM t JOIN big_groups b ON t.grp = b.grp;
CREATE MATERIALIZED VIEW group_pairs AS
SELECT x.grp AS lo, y.grp AS hi FROM per_group x JOIN per_group y ON x.total < y.total;
