-- A view's columns need distinct names.
CREATE TABLE a (id INT PRIMARY KEY, x INT);
CREATE TABLE b (id INT PRIMARY KEY, y INT);
CREATE MATERIALIZED VIEW v AS SELECT a.id, b.id FROM a JOIN b ON a.x = b.y;
