-- An unknown column that resembles no column: no suggestion.
CREATE TABLE items (id INT PRIMARY KEY, price INT);
CREATE MATERIALIZED VIEW v AS SELECT id FROM items WHERE weight > 3;
