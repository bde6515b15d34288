-- An aggregate inside an aggregate.
CREATE TABLE sales (id INT PRIMARY KEY, region TEXT, amount INT);
CREATE MATERIALIZED VIEW v AS SELECT region, MAX(SUM(amount)) AS m FROM sales GROUP BY region;
