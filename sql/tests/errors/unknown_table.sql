-- An unknown table, with the closest name as a suggestion.
CREATE TABLE items (id INT PRIMARY KEY, price INT);
CREATE MATERIALIZED VIEW v AS SELECT id FROM itmes;
