-- An unknown column, with the closest column as a suggestion.
CREATE TABLE items (id INT PRIMARY KEY, price INT);
CREATE MATERIALIZED VIEW v AS SELECT id, pirce * 2 AS double_price FROM items;
