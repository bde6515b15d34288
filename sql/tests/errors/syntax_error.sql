-- A syntax error names the unexpected token's line and column.
CREATE TABLE t (id INT PRIMARY KEY);
CREATE MATERIALIZED VIEW v AS
SELECT id FROM t WHERE;
