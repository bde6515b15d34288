-- Checks CREATE OR REPLACE VIEW (the new definition is the one
-- maintained), CREATE VIEW of the same definition again (a no-op), and
-- CREATE ... IF NOT EXISTS of an existing name (keeps the old definition).
CREATE TABLE t (id INT PRIMARY KEY, v INT);
INSERT INTO t VALUES (1, 10), (2, 20);

CREATE MATERIALIZED VIEW v AS SELECT id FROM t;
CREATE OR REPLACE MATERIALIZED VIEW v AS SELECT id, v * 10 AS big FROM t;
CREATE MATERIALIZED VIEW kept AS SELECT SUM(v) AS total FROM t;
CREATE MATERIALIZED VIEW kept AS SELECT SUM(v) AS total FROM t;
CREATE MATERIALIZED VIEW IF NOT EXISTS kept AS SELECT 0 AS other;
CREATE TABLE IF NOT EXISTS t (other TEXT);
