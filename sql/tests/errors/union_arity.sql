-- UNION inputs need the same number of columns.
CREATE TABLE a (id INT PRIMARY KEY, x INT);
CREATE MATERIALIZED VIEW v AS SELECT id, x FROM a UNION ALL SELECT id FROM a;
