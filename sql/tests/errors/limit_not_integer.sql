-- LIMIT takes a non-negative integer constant.
CREATE TABLE t (id INT PRIMARY KEY);
CREATE MATERIALIZED VIEW v AS SELECT id FROM t ORDER BY id LIMIT 2.5;
