-- A view replaced by a definition that reads the view itself.
CREATE TABLE t (id INT PRIMARY KEY);
CREATE VIEW v AS SELECT id FROM t;
CREATE OR REPLACE VIEW v AS SELECT id FROM v WHERE id > 1;
