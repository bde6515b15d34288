-- An error deep in a multi-line statement names its own line and column,
-- not the statement's first line.
CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, total INT);
CREATE TABLE customers (id INT PRIMARY KEY, name TEXT);
CREATE MATERIALIZED VIEW big_spenders AS
WITH per_customer AS (
    SELECT customer_id, SUM(total) AS spent
    FROM orders
    GROUP BY customer_id
)
SELECT c.name,
       p.spent
FROM per_customer p
JOIN customers c ON c.id = p.customer_id
WHERE p.spent > 100 AND c.nam <> 'test';
