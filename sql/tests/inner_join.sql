-- Checks inner joins: JOIN ... ON, JOIN ... USING, a comma join with the
-- equality in WHERE, CROSS JOIN, an ON with a filter of one side, and a
-- join on an expression. NULL keys never match (not even each other), and
-- duplicate keys multiply.
CREATE TABLE l (id INT PRIMARY KEY, k INT, tag TEXT);
CREATE TABLE r (id INT PRIMARY KEY, k INT, label TEXT);
INSERT INTO l VALUES (1, 1, 'l1'), (2, 2, 'l2'), (3, 2, 'l3'), (4, NULL, 'lnull'), (5, 5, 'l5');
INSERT INTO r VALUES (10, 1, 'r1'), (11, 2, 'r2a'), (12, 2, 'r2b'), (13, NULL, 'rnull'), (14, 3, 'r3');

CREATE MATERIALIZED VIEW on_join AS
SELECT l.tag, r.label FROM l JOIN r ON l.k = r.k;

CREATE MATERIALIZED VIEW using_join AS
SELECT tag, label FROM l INNER JOIN r USING (k);

CREATE MATERIALIZED VIEW comma_join AS
SELECT tag, label FROM l, r WHERE l.k = r.k AND r.label <> 'r2b';

CREATE MATERIALIZED VIEW cross_join AS
SELECT l.id AS lid, r.id AS rid FROM l CROSS JOIN r WHERE l.id <= 2 AND r.id >= 13;

CREATE MATERIALIZED VIEW filtered_on AS
SELECT l.tag, r.label FROM l JOIN r ON l.k = r.k AND l.tag = 'l3';

CREATE MATERIALIZED VIEW expression_key AS
SELECT l.tag, r.label FROM l JOIN r ON l.k + 1 = r.k;

-- Only the key columns are compared: the same value of the join key from
-- two rows of one side gives two result rows.
CREATE MATERIALIZED VIEW key_counts AS
SELECT l.k, COUNT(*) AS pairs FROM l JOIN r ON l.k = r.k GROUP BY l.k;
