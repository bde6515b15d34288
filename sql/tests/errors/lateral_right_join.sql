-- A table function that reads the left side joins it as CROSS JOIN, JOIN ... ON or LEFT JOIN ... ON TRUE only.
CREATE TABLE t (id INT PRIMARY KEY, n INT);
CREATE MATERIALIZED VIEW v AS SELECT id, g FROM t RIGHT JOIN LATERAL generate_series(1, t.n) AS g ON g = id;
