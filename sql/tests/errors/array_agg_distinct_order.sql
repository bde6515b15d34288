-- With DISTINCT, array_agg's ORDER BY may only order by its argument (as in PostgreSQL).
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, s TEXT);
CREATE MATERIALIZED VIEW v AS SELECT g, array_agg(DISTINCT s ORDER BY id) AS ss FROM t GROUP BY g;
