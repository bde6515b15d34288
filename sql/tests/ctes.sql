-- Checks WITH: a CTE used twice, a CTE reading an earlier one, column
-- names given to a CTE, a CTE that shadows a table of the same name, and
-- a CTE inside a subquery.
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE TABLE shadowed (id INT PRIMARY KEY);
INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);
INSERT INTO shadowed VALUES (99);

CREATE MATERIALIZED VIEW pairs AS
WITH small AS (SELECT id, v FROM t WHERE v < 30)
SELECT a.id AS a, b.id AS b FROM small a JOIN small b ON a.v < b.v;

CREATE MATERIALIZED VIEW chained AS
WITH doubled AS (SELECT id, v * 2 AS w FROM t),
     big AS (SELECT id FROM doubled WHERE w > 25)
SELECT COUNT(*) AS n FROM big;

CREATE MATERIALIZED VIEW named_columns AS
WITH c (k, value) AS (SELECT id, v FROM t)
SELECT k, value FROM c WHERE k <> 2;

CREATE MATERIALIZED VIEW shadowing AS
WITH shadowed AS (SELECT id FROM t WHERE id = 1)
SELECT id FROM shadowed;

CREATE MATERIALIZED VIEW inner_with AS
SELECT total FROM (WITH s AS (SELECT SUM(v) AS total FROM t) SELECT total FROM s) AS x;
