-- Checks LEFT, RIGHT and FULL joins: unmatched rows padded with NULLs, a
-- NULL key never matches (its row stays unmatched on the outer side), a
-- filter in ON on the side whose rows may be missing, and a WHERE on the
-- padded side after the join (IS NULL: an anti-join).
CREATE TABLE customers (id INT PRIMARY KEY, name TEXT, city_id INT);
CREATE TABLE cities (id INT PRIMARY KEY, city TEXT, country TEXT);
INSERT INTO customers VALUES (1, 'ann', 10), (2, 'bob', 20), (3, 'cat', NULL), (4, 'dan', 99), (5, 'eve', 10);
INSERT INTO cities VALUES (10, 'paris', 'fr'), (20, 'oslo', 'no'), (30, 'rome', 'it');

CREATE MATERIALIZED VIEW left_join AS
SELECT c.name, ci.city FROM customers c LEFT JOIN cities ci ON c.city_id = ci.id;

CREATE MATERIALIZED VIEW right_join AS
SELECT c.name, ci.city FROM customers c RIGHT JOIN cities ci ON c.city_id = ci.id;

CREATE MATERIALIZED VIEW full_join AS
SELECT c.name, ci.city FROM customers c FULL OUTER JOIN cities ci ON c.city_id = ci.id;

CREATE MATERIALIZED VIEW left_join_filtered_right AS
SELECT c.name, ci.city FROM customers c LEFT JOIN cities ci ON c.city_id = ci.id AND ci.country = 'fr';

CREATE MATERIALIZED VIEW without_city AS
SELECT c.name FROM customers c LEFT JOIN cities ci ON c.city_id = ci.id WHERE ci.id IS NULL;

CREATE MATERIALIZED VIEW cities_without_customers AS
SELECT ci.city FROM customers c RIGHT JOIN cities ci ON ci.id = c.city_id WHERE c.id IS NULL;

CREATE MATERIALIZED VIEW customers_per_city AS
SELECT ci.city, COUNT(c.id) AS customers FROM cities ci LEFT JOIN customers c ON c.city_id = ci.id GROUP BY ci.city;
