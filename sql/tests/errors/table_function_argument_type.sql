-- generate_series() counts integers.
CREATE TABLE t (id INT PRIMARY KEY, s TEXT);
CREATE MATERIALIZED VIEW v AS SELECT id, g FROM t, generate_series(1, s) AS g;
