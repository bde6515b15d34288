-- Checks CASE (searched and simple, with and without ELSE), CAST between
-- types (text to number, number to text, double to integer rounding,
-- integer to boolean, text to date, a text that does not cast is NULL),
-- COALESCE, NULLIF, GREATEST and LEAST (which skip NULLs).
CREATE TABLE t (id INT PRIMARY KEY, n INT, s TEXT, d DOUBLE);
INSERT INTO t VALUES
    (1, 5, '42', 2.5),
    (2, -3, 'abc', -2.5),
    (3, NULL, NULL, NULL),
    (4, 0, '2024-02-29', 0.49);

CREATE MATERIALIZED VIEW cases AS
SELECT id,
       CASE WHEN n > 0 THEN 'positive' WHEN n < 0 THEN 'negative' ELSE 'zero or null' END AS sign,
       CASE n WHEN 5 THEN 'five' WHEN 0 THEN 'nought' END AS named,
       CASE WHEN n > 0 THEN n ELSE d END AS mixed
FROM t;

CREATE MATERIALIZED VIEW casts AS
SELECT id,
       CAST(s AS INT) AS s_int,
       CAST(n AS TEXT) AS n_text,
       CAST(d AS INT) AS d_int,
       CAST(n AS BOOLEAN) AS n_bool,
       CAST(s AS DATE) AS s_date,
       CAST(n AS DOUBLE) / 2 AS half
FROM t;

CREATE MATERIALIZED VIEW fallbacks AS
SELECT id,
       COALESCE(n, -1) AS n_or_minus_1,
       COALESCE(s, CAST(n AS TEXT), 'none') AS first_text,
       NULLIF(n, 0) AS n_unless_0,
       GREATEST(n, 1, NULL) AS at_least_1,
       LEAST(n, d) AS smaller
FROM t;
