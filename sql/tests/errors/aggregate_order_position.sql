-- An aggregate's ORDER BY orders by expressions: a number is not a position there.
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, s TEXT);
CREATE MATERIALIZED VIEW v AS SELECT g, string_agg(s, ',' ORDER BY 1) AS ss FROM t GROUP BY g;
