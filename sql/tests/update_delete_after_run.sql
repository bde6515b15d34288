-- Checks UPDATE and DELETE reaching running views as retractions: views
-- run after each phase, resuming their state; aggregates, a join and a
-- DISTINCT follow rows that change and leave, and groups that empty out
-- disappear.
CREATE TABLE items (id INT PRIMARY KEY, kind TEXT, price INT);
CREATE TABLE kinds (kind TEXT PRIMARY KEY, label TEXT);
INSERT INTO items VALUES (1, 'fruit', 3), (2, 'fruit', 4), (3, 'veg', 2), (4, 'nut', 9);
INSERT INTO kinds VALUES ('fruit', 'Fruit'), ('veg', 'Vegetable');

CREATE MATERIALIZED VIEW per_kind AS SELECT kind, COUNT(*) AS n, SUM(price) AS total, MAX(price) AS top FROM items GROUP BY kind;
CREATE MATERIALIZED VIEW labelled AS SELECT i.id, k.label FROM items i JOIN kinds k ON i.kind = k.kind;
CREATE MATERIALIZED VIEW kinds_used AS SELECT DISTINCT kind FROM items;
-- run
UPDATE items SET price = 1 WHERE id = 2;
UPDATE items SET kind = 'veg' WHERE id = 1;
DELETE FROM items WHERE kind = 'nut';
-- run
DELETE FROM kinds WHERE kind = 'veg';
INSERT INTO kinds VALUES ('nut', 'Nut');
INSERT INTO items VALUES (5, 'nut', 8);
