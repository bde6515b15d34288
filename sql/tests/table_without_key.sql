-- Checks a table without a primary key: identical rows are kept apart
-- (multiplicity 2), DELETE removes every matching row, and UPDATE changes
-- every matching row.
CREATE TABLE log (level TEXT, msg TEXT);
INSERT INTO log VALUES ('info', 'start'), ('info', 'start'), ('warn', 'disk'), ('error', 'boom'), ('warn', 'disk');
INSERT INTO log (msg, level) VALUES ('late', 'info');
INSERT INTO log (level) VALUES ('debug');
DELETE FROM log WHERE level = 'error';
UPDATE log SET msg = 'disk full' WHERE msg = 'disk';

CREATE MATERIALIZED VIEW lines AS SELECT level, msg FROM log;
CREATE MATERIALIZED VIEW per_level AS SELECT level, COUNT(*) AS n FROM log GROUP BY level;
