-- An aggregate in WHERE (HAVING filters groups).
CREATE TABLE sales (id INT PRIMARY KEY, region TEXT, amount INT);
CREATE MATERIALIZED VIEW v AS SELECT region FROM sales WHERE SUM(amount) > 10 GROUP BY region;
