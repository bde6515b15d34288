-- Checks SQL's three-valued logic: comparisons with NULL are NULL, AND/OR
-- follow Kleene's tables, NOT NULL is NULL, WHERE keeps only TRUE rows,
-- IS [NOT] NULL, IS [NOT] DISTINCT FROM, IS [NOT] TRUE/FALSE, and IN/NOT IN
-- lists holding a NULL.
CREATE TABLE t (id INT PRIMARY KEY, a BOOLEAN, b BOOLEAN, x INT);
INSERT INTO t VALUES
    (1, TRUE, TRUE, 1),
    (2, TRUE, FALSE, 2),
    (3, TRUE, NULL, NULL),
    (4, FALSE, NULL, 4),
    (5, NULL, NULL, NULL),
    (6, FALSE, FALSE, 6);

CREATE MATERIALIZED VIEW truth AS
SELECT id,
       a AND b AS a_and_b,
       a OR b AS a_or_b,
       NOT a AS not_a,
       x = 1 AS x_is_1,
       x <> 1 AS x_not_1,
       x IS NULL AS x_null,
       x IS NOT NULL AS x_not_null,
       x IS DISTINCT FROM 2 AS x_distinct_2,
       x IS NOT DISTINCT FROM NULL AS x_not_distinct_null,
       b IS TRUE AS b_true,
       b IS NOT FALSE AS b_not_false,
       x IN (1, 2) AS x_in,
       x IN (1, NULL) AS x_in_null,
       x NOT IN (1, NULL) AS x_not_in_null
FROM t;

-- Only rows whose condition is TRUE survive (NULL and FALSE are dropped).
CREATE MATERIALIZED VIEW kept AS SELECT id FROM t WHERE a OR b;
CREATE MATERIALIZED VIEW kept_not AS SELECT id FROM t WHERE NOT (a OR b);
CREATE MATERIALIZED VIEW kept_not_in AS SELECT id FROM t WHERE x NOT IN (2, 4);
-- NOT IN with a NULL in the list keeps no row at all.
CREATE MATERIALIZED VIEW kept_not_in_null AS SELECT id FROM t WHERE x NOT IN (2, NULL);
