-- A subquery of an aggregated query reads only the groups' keys (as PostgreSQL says).
CREATE TABLE t (id INT PRIMARY KEY, k INT, x INT);
CREATE TABLE o (k INT PRIMARY KEY, y INT);
CREATE MATERIALIZED VIEW v AS SELECT k, SUM(x) AS s FROM t GROUP BY k HAVING SUM(x) > (SELECT MAX(y) FROM o WHERE o.y = t.x);
