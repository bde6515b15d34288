-- Subqueries in expressions, maintained as joins: each phase's changes
-- reach them as retractions, NULLs included (NOT IN over a NULL is never TRUE).
CREATE TABLE t (id INT PRIMARY KEY, price INT, category INT);
CREATE TABLE banned (id INT);
CREATE TABLE categories (category INT PRIMARY KEY, name TEXT);
INSERT INTO t VALUES (1, 10, 1), (2, 20, 1), (3, 30, 2), (4, NULL, 2), (5, 50, NULL);
INSERT INTO banned VALUES (2);
INSERT INTO categories VALUES (1, 'books'), (2, 'games');
CREATE MATERIALIZED VIEW allowed AS SELECT id FROM t WHERE id NOT IN (SELECT id FROM banned);
CREATE MATERIALIZED VIEW above_average AS SELECT id, price FROM t WHERE price > (SELECT AVG(price) FROM t);
CREATE MATERIALIZED VIEW cheaper AS
  SELECT id, (SELECT COUNT(*) FROM t AS other WHERE other.price < t.price) AS cheaper_items FROM t;
CREATE MATERIALIZED VIEW named AS
  SELECT id, (SELECT name FROM categories WHERE categories.category = t.category LIMIT 1) AS name,
         EXISTS (SELECT 1 FROM banned WHERE banned.id = t.id) AS is_banned
  FROM t;
-- run
INSERT INTO banned VALUES (NULL);
UPDATE t SET price = 100 WHERE id = 1;
DELETE FROM categories WHERE category = 2;
-- run
DELETE FROM banned WHERE id IS NULL;
DELETE FROM t WHERE id = 5;
INSERT INTO categories VALUES (2, 'toys');
