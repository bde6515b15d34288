-- A column qualified with a name that is not in FROM (the table's alias hides its name).
CREATE TABLE items (id INT PRIMARY KEY, price INT);
CREATE MATERIALIZED VIEW v AS SELECT items.id FROM items AS i;
