-- A table that a view reads cannot be dropped without CASCADE.
CREATE TABLE t (id INT PRIMARY KEY);
CREATE VIEW v AS SELECT id FROM t;
CREATE MATERIALIZED VIEW w AS SELECT COUNT(*) AS n FROM v;
DROP TABLE t;
