-- A view's rows are keyed by column name: a repeated name is given the first
-- free name_N (with a notice), whatever the names are (expressions without
-- a name are all ?column?).
CREATE TABLE a (id INT PRIMARY KEY, x INT);
CREATE TABLE b (id INT PRIMARY KEY, y INT);
INSERT INTO a VALUES (1, 10), (2, 20);
INSERT INTO b VALUES (7, 10), (8, 30);
CREATE MATERIALIZED VIEW v AS SELECT a.id, b.id, a.x AS id_2, b.id FROM a JOIN b ON a.x = b.y;
CREATE MATERIALIZED VIEW w AS SELECT x + 1, x * 2, x - 1 FROM a;
