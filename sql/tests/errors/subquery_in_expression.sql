-- Subqueries in expressions are not supported (joins and subqueries in FROM are).
CREATE TABLE t (id INT PRIMARY KEY, price INT);
CREATE TABLE banned (id INT PRIMARY KEY);
CREATE MATERIALIZED VIEW v AS SELECT id FROM t WHERE id NOT IN (SELECT id FROM banned);
