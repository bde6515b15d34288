-- A column name that both sides of a join have.
CREATE TABLE a (id INT PRIMARY KEY, x INT);
CREATE TABLE b (id INT PRIMARY KEY, y INT);
CREATE MATERIALIZED VIEW v AS SELECT id, x, y FROM a JOIN b ON a.x = b.y;
