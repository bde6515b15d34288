-- Checks a file that fails in a later phase: the first phase runs and its
-- view is listed, then dropping the table the view reads is refused and
-- nothing of the failing phase is applied (not even the INSERT before it).
CREATE TABLE t (id INT PRIMARY KEY);
INSERT INTO t VALUES (1);
CREATE MATERIALIZED VIEW ids AS SELECT id FROM t;
-- run
INSERT INTO t VALUES (2);
DROP TABLE t;
