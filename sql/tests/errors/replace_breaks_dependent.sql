-- CREATE OR REPLACE of a view that another view reads: the new definition
-- lacks a column the dependent view uses.
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE VIEW base AS SELECT id, v FROM t;
CREATE MATERIALIZED VIEW top AS SELECT MAX(v) AS m FROM base;
CREATE OR REPLACE VIEW base AS SELECT id FROM t;
