-- array_agg() would return an ARRAY, a type Millpond's SQL does not have.
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, s TEXT);
CREATE MATERIALIZED VIEW v AS SELECT g, array_agg(s ORDER BY id) AS ss FROM t GROUP BY g;
