-- Window functions over groups are computed after HAVING, for SELECT items only.
CREATE TABLE t (id INT PRIMARY KEY, k INT, x INT);
CREATE MATERIALIZED VIEW v AS SELECT k, SUM(x) AS s FROM t GROUP BY k HAVING RANK() OVER (ORDER BY SUM(x)) = 1;
