-- Subqueries over groups: ANY/ALL in HAVING, correlated on the group key
-- (SQLite has no ANY/ALL, so this file pins them), and a subquery in an
-- outer join's ON; the views follow inserts, updates and deletes.
CREATE TABLE t (id INT PRIMARY KEY, k INT, x INT);
CREATE TABLE o (id INT PRIMARY KEY, k INT, y INT);
INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 5), (4, 3, NULL), (5, NULL, 7);
INSERT INTO o VALUES (1, 1, 25), (2, 1, 40), (3, 2, 1), (4, 2, NULL), (5, 3, 0);

-- Groups whose sum beats every y of their key (TRUE over no y), and some y.
CREATE MATERIALIZED VIEW beats_all AS
SELECT k, SUM(x) AS s FROM t GROUP BY k HAVING SUM(x) > ALL (SELECT y FROM o WHERE o.k = t.k);
CREATE MATERIALIZED VIEW beats_any AS
SELECT k, SUM(x) AS s, SUM(x) > ANY (SELECT y FROM o WHERE o.k = t.k) AS any_y FROM t GROUP BY k;

-- A LEFT JOIN whose ON reads a subquery: t's rows matched with o's rows
-- of their key whose y is above the key's smallest x.
CREATE MATERIALIZED VIEW on_subquery AS
SELECT t.id, o.id AS oid FROM t LEFT JOIN o ON o.k = t.k AND o.y > (SELECT MIN(x) FROM t AS i WHERE i.k = o.k);

UPDATE t SET x = 50 WHERE id = 2;
DELETE FROM o WHERE id = 4;
INSERT INTO t VALUES (6, 3, 1);
