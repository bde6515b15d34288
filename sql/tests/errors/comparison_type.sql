-- Comparing a TEXT column with a number.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
CREATE MATERIALIZED VIEW v AS SELECT id FROM t WHERE name = 42;
