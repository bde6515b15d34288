-- COUNT of a row value (PostgreSQL's COUNT(DISTINCT (a, b)) would count tuples with NULL members too).
CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT);
CREATE MATERIALIZED VIEW v AS SELECT COUNT(DISTINCT (a, b)) AS n FROM t;
