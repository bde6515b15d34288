-- ROW_NUMBER() must be limited by a filter on it in an outer query.
CREATE TABLE bids (id INT PRIMARY KEY, auction INT, price INT);
CREATE MATERIALIZED VIEW v AS
SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn
FROM bids;
