-- regexp_replace's flags: g, i and c.
CREATE TABLE t (id INT PRIMARY KEY, s TEXT);
CREATE MATERIALIZED VIEW v AS SELECT id, regexp_replace(s, 'a+', 'b', 'gx') AS r FROM t;
