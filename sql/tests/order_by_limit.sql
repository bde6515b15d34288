-- Checks ORDER BY ... LIMIT k: the first k rows of the order (ascending
-- puts NULLs first, DESC puts them last, NULLS FIRST/LAST override),
-- ORDER BY an output position and an expression, LIMIT 0, LIMIT beyond the
-- row count, duplicates counted against k, ORDER BY LIMIT in a subquery,
-- and ORDER BY columns that are not selected.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT, score INT);
INSERT INTO t VALUES (1, 'ann', 50), (2, 'bob', NULL), (3, 'cat', 70), (4, 'dan', 50), (5, 'eve', 90);
CREATE TABLE dup (v INT);
INSERT INTO dup VALUES (1), (1), (1), (2);

CREATE MATERIALIZED VIEW lowest2 AS SELECT name, score FROM t ORDER BY score, name LIMIT 2;
CREATE MATERIALIZED VIEW highest2 AS SELECT name, score FROM t ORDER BY score DESC LIMIT 2;
CREATE MATERIALIZED VIEW highest_nulls_first AS SELECT name FROM t ORDER BY score DESC NULLS FIRST LIMIT 1;
CREATE MATERIALIZED VIEW by_position AS SELECT score, name FROM t ORDER BY 2 DESC LIMIT 1;
CREATE MATERIALIZED VIEW by_expression AS SELECT name FROM t ORDER BY LENGTH(name) * 0 + id % 3, id LIMIT 2;
CREATE MATERIALIZED VIEW none AS SELECT name FROM t ORDER BY name LIMIT 0;
CREATE MATERIALIZED VIEW all_of_them AS SELECT name FROM t ORDER BY name LIMIT 100;
CREATE MATERIALIZED VIEW dup_limit AS SELECT v FROM dup ORDER BY v LIMIT 2;
CREATE MATERIALIZED VIEW limited_then_counted AS
SELECT COUNT(*) AS n, SUM(score) AS s FROM (SELECT score FROM t ORDER BY score DESC LIMIT 3) AS top3;
