-- Checks: projection, WHERE, arithmetic and column aliases over a table;
-- a FROM-less SELECT; a non-materialized view is not listed.
CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price INT, qty INT);
INSERT INTO items VALUES (1, 'apple', 3, 10), (2, 'pear', 5, 0), (3, 'fig', 12, 2), (4, 'kiwi', NULL, 7);

CREATE MATERIALIZED VIEW stock AS
SELECT id, name, price * qty AS value, price + 1 AS next_price FROM items WHERE qty > 0;

CREATE MATERIALIZED VIEW constant AS SELECT 1 + 2 AS three, 'x' || 'y' AS xy;

CREATE VIEW cheap AS SELECT name FROM items WHERE price < 5;
