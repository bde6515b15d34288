-- A selected column that is neither grouped nor aggregated.
CREATE TABLE sales (id INT PRIMARY KEY, region TEXT, amount INT);
CREATE MATERIALIZED VIEW v AS
SELECT region, amount, COUNT(*) AS n
FROM sales
GROUP BY region;
