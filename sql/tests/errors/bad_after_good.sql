-- A bad statement after good ones: the whole file is refused, so neither
-- the table, its rows nor the first view exist afterwards (checked).
CREATE TABLE t (id INT PRIMARY KEY, v INT);
INSERT INTO t VALUES (1, 10), (2, 20);
CREATE MATERIALIZED VIEW good AS SELECT id FROM t;
CREATE MATERIALIZED VIEW bad AS SELECT id, v / 'x' AS q FROM t;
