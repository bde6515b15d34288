-- An outer join needs an equality between its two sides.
CREATE TABLE a (id INT PRIMARY KEY, x INT);
CREATE TABLE b (id INT PRIMARY KEY, y INT);
CREATE MATERIALIZED VIEW v AS SELECT a.id, b.y FROM a LEFT JOIN b ON a.x < b.y;
