-- INSERT ... SELECT and CREATE TABLE ... AS: the query's answer when the
-- statement runs (tables as the batch has left them), appended as ordinary
-- table rows; later changes to what it read do not follow them.
CREATE TABLE orders (id INT PRIMARY KEY, customer TEXT, amount INT);
CREATE TABLE big_orders (id INT PRIMARY KEY, customer TEXT, amount INT);
INSERT INTO orders VALUES (1, 'ann', 50), (2, 'bob', 150), (3, 'ann', 300);
INSERT INTO big_orders SELECT * FROM orders WHERE amount > 100;
CREATE TABLE totals AS SELECT customer, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY customer;
CREATE TABLE squares AS SELECT x, x * x AS sq, NULL AS nothing FROM generate_series(1, 3) AS g(x);
CREATE MATERIALIZED VIEW big AS SELECT * FROM big_orders;
CREATE MATERIALIZED VIEW customer_totals AS SELECT * FROM totals;
CREATE MATERIALIZED VIEW all_squares AS SELECT * FROM squares;
-- run
INSERT INTO orders VALUES (4, 'cy', 500);
INSERT INTO big_orders (id, amount, customer) SELECT id, amount * 2, upper(customer) FROM orders WHERE id = 4;
UPDATE totals SET total = 0 WHERE customer = 'bob';
INSERT INTO squares SELECT x + 10, sq, 'more' FROM squares WHERE x > 1 ORDER BY x;
