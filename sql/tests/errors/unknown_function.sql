-- An unknown function, with the closest known one as a suggestion.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
CREATE MATERIALIZED VIEW v AS SELECT id, lenght(name) AS n FROM t;
