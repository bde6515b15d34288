-- SELECT * with GROUP BY: the columns * stands for are not grouped.
CREATE TABLE sales (id INT PRIMARY KEY, region TEXT, amount INT);
CREATE MATERIALIZED VIEW v AS SELECT *, COUNT(*) AS n FROM sales GROUP BY region;
