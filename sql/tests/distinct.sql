-- Checks SELECT DISTINCT: on one and on several columns, NULLs count as
-- equal to each other, and DISTINCT over a join and over an expression.
CREATE TABLE t (id INT PRIMARY KEY, a TEXT, b INT);
INSERT INTO t VALUES (1, 'x', 1), (2, 'x', 1), (3, 'x', 2), (4, NULL, NULL), (5, NULL, NULL), (6, 'y', NULL);

CREATE MATERIALIZED VIEW distinct_a AS SELECT DISTINCT a FROM t;
CREATE MATERIALIZED VIEW distinct_ab AS SELECT DISTINCT a, b FROM t;
CREATE MATERIALIZED VIEW distinct_expression AS SELECT DISTINCT b % 2 AS parity FROM t;
CREATE MATERIALIZED VIEW all_rows AS SELECT ALL a FROM t;
CREATE MATERIALIZED VIEW distinct_join AS SELECT DISTINCT t1.a FROM t t1 JOIN t t2 ON t1.b = t2.b;
