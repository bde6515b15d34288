-- A LATERAL subquery reads the rows to its left: a FULL JOIN has no left row for the right side's own rows.
CREATE TABLE t (id INT PRIMARY KEY, n INT);
CREATE TABLE u (id INT PRIMARY KEY, m INT);
CREATE MATERIALIZED VIEW v AS SELECT t.id, q.m FROM t FULL JOIN LATERAL (SELECT m FROM u WHERE u.id = t.n) q ON TRUE;
