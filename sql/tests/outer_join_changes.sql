-- Checks outer joins under changes, phase by phase: a LEFT JOIN's padded
-- row is replaced when its first match arrives and comes back when the
-- last match leaves; a FULL JOIN does the same on both sides; a row whose
-- key turns from NULL to a value starts matching.
CREATE TABLE l (id INT PRIMARY KEY, k INT);
CREATE TABLE r (id INT PRIMARY KEY, k INT, tag TEXT);
INSERT INTO l VALUES (1, 10), (2, 20), (3, NULL);
INSERT INTO r VALUES (100, 30, 'thirty');

CREATE MATERIALIZED VIEW left_join AS SELECT l.id, r.tag FROM l LEFT JOIN r ON l.k = r.k;
CREATE MATERIALIZED VIEW full_join AS SELECT l.id, r.tag FROM l FULL JOIN r ON l.k = r.k;
-- run
INSERT INTO r VALUES (101, 10, 'ten'), (102, 10, 'ten again');
UPDATE l SET k = 30 WHERE id = 3;
-- run
DELETE FROM r WHERE k = 10;
UPDATE r SET k = 20 WHERE id = 100;
