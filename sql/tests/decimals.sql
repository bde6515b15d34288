-- Checks DECIMAL(p, s): values rounded to the declared scale on insert
-- (half away from zero), exact sums (0.1 + 0.2 = 0.3), products and
-- quotients, comparison with integers and text literals, CAST to and from
-- DECIMAL, ROUND/FLOOR/CEIL/ABS, and AVG rounding.
CREATE TABLE prices (id INT PRIMARY KEY, p DECIMAL(10, 2));
INSERT INTO prices VALUES (1, 0.1), (2, 0.2), (3, 2.345), (4, -2.345), (5, 10);

CREATE MATERIALIZED VIEW stored AS SELECT id, p FROM prices;
CREATE MATERIALIZED VIEW arithmetic AS
SELECT id, p + 0.005 AS plus, p * 3 AS times_3, p / 3 AS third, p - 10 AS minus_int
FROM prices WHERE id <= 3;
CREATE MATERIALIZED VIEW rounding AS
SELECT id, ROUND(p) AS r0, ROUND(p, 1) AS r1, FLOOR(p) AS fl, CEIL(p) AS ce, ABS(p) AS ab,
       CAST(p AS INT) AS as_int, CAST(p AS DOUBLE) AS as_double
FROM prices;
CREATE MATERIALIZED VIEW totals AS SELECT SUM(p) AS s, AVG(p) AS a, MIN(p) AS lo, MAX(p) AS hi FROM prices;
CREATE MATERIALIZED VIEW compared AS SELECT id FROM prices WHERE p > 0.15 AND p < '10' AND p <> 2.35;
