-- A constant that does not cast is an error when bound (a column's value would be NULL).
CREATE MATERIALIZED VIEW v AS SELECT CAST('12x' AS INT) AS n;
