-- A view's scalar subquery must be known to return at most one row: a view
-- cannot stop at a second row as a one-off query does.
CREATE TABLE t (id INT PRIMARY KEY, category INT);
CREATE TABLE names (category INT, name TEXT);
CREATE MATERIALIZED VIEW v AS SELECT id, (SELECT name FROM names WHERE names.category = t.category) AS name FROM t;
