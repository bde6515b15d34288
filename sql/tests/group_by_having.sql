-- Checks GROUP BY: by a column, by an expression, by an output position
-- and by an output alias; HAVING on an aggregate that is not selected;
-- expressions over aggregates; a NULL group key forms its own group.
CREATE TABLE sales (id INT PRIMARY KEY, region TEXT, product TEXT, amount INT);
INSERT INTO sales VALUES
    (1, 'north', 'apple', 10),
    (2, 'north', 'pear', 20),
    (3, 'south', 'apple', 5),
    (4, 'south', 'apple', 7),
    (5, 'east', 'fig', 100),
    (6, NULL, 'fig', 1),
    (7, NULL, 'kiwi', 2);

CREATE MATERIALIZED VIEW by_region AS
SELECT region, COUNT(*) AS n, SUM(amount) AS total, SUM(amount) * 2 + COUNT(*) AS score
FROM sales GROUP BY region;

CREATE MATERIALIZED VIEW by_initial AS
SELECT UPPER(SUBSTRING(product, 1, 1)) AS initial, COUNT(*) AS n
FROM sales GROUP BY UPPER(SUBSTRING(product, 1, 1));

CREATE MATERIALIZED VIEW by_position AS
SELECT product, MAX(amount) AS top FROM sales GROUP BY 1;

CREATE MATERIALIZED VIEW by_alias AS
SELECT amount > 10 AS big, COUNT(*) AS n FROM sales GROUP BY big;

CREATE MATERIALIZED VIEW busy_regions AS
SELECT region FROM sales GROUP BY region HAVING COUNT(*) >= 2 AND SUM(amount) > 10;
