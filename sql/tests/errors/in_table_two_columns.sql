-- SQLite's `x IN name` reads the table as a one-column subquery.
CREATE TABLE t (id INT PRIMARY KEY, price INT);
CREATE MATERIALIZED VIEW v AS SELECT id FROM t WHERE id IN t;
