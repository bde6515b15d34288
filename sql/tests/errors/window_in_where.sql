-- Window functions are computed for SELECT items, after WHERE.
CREATE TABLE t (id INT PRIMARY KEY, x INT);
CREATE MATERIALIZED VIEW v AS SELECT id FROM t WHERE RANK() OVER (ORDER BY x) = 1;
