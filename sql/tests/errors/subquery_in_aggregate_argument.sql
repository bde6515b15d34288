-- An aggregate's argument is over the input rows: a subquery there is not supported.
CREATE TABLE t (id INT PRIMARY KEY, a INT);
CREATE TABLE o (k INT PRIMARY KEY, y INT);
CREATE MATERIALIZED VIEW v AS SELECT SUM((SELECT MAX(y) FROM o)) AS s FROM t;
