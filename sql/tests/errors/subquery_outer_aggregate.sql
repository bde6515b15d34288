-- SQL computes an aggregate of only an enclosing query's columns in that query, not in the subquery.
CREATE TABLE t (id INT PRIMARY KEY, a INT);
CREATE TABLE o (k INT PRIMARY KEY, y INT);
CREATE MATERIALIZED VIEW v AS SELECT id, (SELECT SUM(t.a) FROM o) AS s FROM t;
