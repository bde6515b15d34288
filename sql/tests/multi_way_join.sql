-- Checks joins of three and four inputs: a chain of inner joins, a chain
-- mixing inner and left joins, a self join through aliases, a join with a
-- subquery, and join keys found in WHERE for a comma-separated FROM.
CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, product_id INT, qty INT);
CREATE TABLE customers (id INT PRIMARY KEY, name TEXT, referrer_id INT);
CREATE TABLE products (id INT PRIMARY KEY, title TEXT, price INT);
INSERT INTO customers VALUES (1, 'ann', NULL), (2, 'bob', 1), (3, 'cat', 2);
INSERT INTO products VALUES (100, 'pen', 2), (101, 'ink', 7), (102, 'pad', 4);
INSERT INTO orders VALUES (1000, 1, 100, 3), (1001, 2, 101, 1), (1002, 2, 100, 5), (1003, 3, 999, 1), (1004, 9, 102, 2);

CREATE MATERIALIZED VIEW order_lines AS
SELECT o.id, c.name, p.title, o.qty * p.price AS total
FROM orders o
JOIN customers c ON o.customer_id = c.id
JOIN products p ON o.product_id = p.id;

CREATE MATERIALIZED VIEW order_lines_outer AS
SELECT o.id, c.name, p.title
FROM orders o
LEFT JOIN customers c ON o.customer_id = c.id
LEFT JOIN products p ON o.product_id = p.id;

CREATE MATERIALIZED VIEW referrals AS
SELECT c.name AS customer, r.name AS referrer, rr.name AS referrers_referrer
FROM customers c
JOIN customers r ON c.referrer_id = r.id
LEFT JOIN customers rr ON r.referrer_id = rr.id;

CREATE MATERIALIZED VIEW spend AS
SELECT c.name, t.spent
FROM customers c
JOIN (SELECT o.customer_id, SUM(o.qty * p.price) AS spent FROM orders o JOIN products p ON o.product_id = p.id
      GROUP BY o.customer_id) t ON t.customer_id = c.id;

CREATE MATERIALIZED VIEW comma_three AS
SELECT c.name, p.title FROM orders o, customers c, products p
WHERE o.customer_id = c.id AND o.product_id = p.id AND p.price > 3;
