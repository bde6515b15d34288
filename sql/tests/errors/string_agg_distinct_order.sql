-- With DISTINCT, an aggregate's ORDER BY may only order by its argument (as PostgreSQL says).
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, s TEXT);
CREATE MATERIALIZED VIEW v AS SELECT g, string_agg(DISTINCT s, ',' ORDER BY id) AS ss FROM t GROUP BY g;
