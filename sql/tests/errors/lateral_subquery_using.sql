-- USING and NATURAL join a LATERAL subquery on no columns of its own choosing: not supported.
CREATE TABLE t (id INT PRIMARY KEY, n INT);
CREATE TABLE u (id INT PRIMARY KEY, m INT);
CREATE MATERIALIZED VIEW v AS SELECT * FROM t JOIN LATERAL (SELECT id, m FROM u WHERE u.m = t.n) q USING (id);
