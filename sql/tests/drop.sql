-- Checks DROP: DROP MATERIALIZED VIEW of a view nothing reads, DROP ... IF
-- EXISTS of a missing object (DROP VIEW of a dropped materialized view),
-- DROP TABLE ... CASCADE taking its dependent views (also transitively,
-- through a view), and a name reused after its DROP. Only the views left
-- are listed; a view dropped after a run can no longer be read (checked).
CREATE TABLE a (id INT PRIMARY KEY);
CREATE TABLE b (id INT PRIMARY KEY);
INSERT INTO a VALUES (1), (2);
INSERT INTO b VALUES (10);

CREATE MATERIALIZED VIEW a_ids AS SELECT id FROM a;
CREATE VIEW b_plain AS SELECT id FROM b;
CREATE MATERIALIZED VIEW b_ids AS SELECT id FROM b_plain;
CREATE MATERIALIZED VIEW b_count AS SELECT COUNT(*) AS n FROM b_ids;
CREATE MATERIALIZED VIEW unused AS SELECT 1 AS one;

DROP MATERIALIZED VIEW unused;
DROP VIEW IF EXISTS unused;
DROP TABLE IF EXISTS nothing_here;
DROP TABLE b CASCADE;

CREATE TABLE b (id INT PRIMARY KEY, note TEXT);
INSERT INTO b VALUES (20, 'new');
CREATE MATERIALIZED VIEW b_notes AS SELECT id, note FROM b;
-- run
DROP MATERIALIZED VIEW a_ids;
CREATE MATERIALIZED VIEW a_count AS SELECT COUNT(*) AS n FROM a;
