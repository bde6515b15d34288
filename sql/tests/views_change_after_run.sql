-- Checks views that change after the data directory has run: a view
-- replaced with CREATE OR REPLACE shows only its new definition's rows
-- (none of the old ones linger), a view created later sees the rows that
-- arrived before it, a dropped view is gone, and a view left alone keeps
-- following its input.
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE SOURCE s (k TEXT) FROM TOPIC 's' FORMAT JSON;
INSERT INTO t VALUES (1, 10), (2, 20);
CREATE MATERIALIZED VIEW replaced AS SELECT id FROM t;
CREATE MATERIALIZED VIEW dropped AS SELECT COUNT(*) AS n FROM t;
CREATE MATERIALIZED VIEW stays AS SELECT SUM(v) AS total FROM t;
CREATE MATERIALIZED VIEW keys AS SELECT k FROM s;
-- topic: s
-- record: {"k": "a"}
-- run
CREATE OR REPLACE MATERIALIZED VIEW replaced AS SELECT id, v FROM t WHERE v > 10;
DROP MATERIALIZED VIEW dropped;
CREATE MATERIALIZED VIEW later AS SELECT COUNT(*) AS n, MAX(v) AS top FROM t;
CREATE MATERIALIZED VIEW later_keys AS SELECT k, COUNT(*) AS n FROM s GROUP BY k;
INSERT INTO t VALUES (3, 30);
-- record: {"k": "b"}
-- record: {"k": "a"}
