-- Nexmark q17 (sql/nexmark/q17.sql): auction statistics report. Per auction and
-- day (UTC): bids by price rank and price statistics. Same semantics; AVG
-- cast to DOUBLE as Millpond's AVG of a BIGINT.
CREATE TEMPORARY VIEW nexmark_q17 AS
SELECT auction, CAST(date_time AS DATE) AS `day`,
    COUNT(*) AS total_bids,
    COUNT(CASE WHEN price < 10000 THEN 1 END) AS rank1_bids,
    COUNT(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 END) AS rank2_bids,
    COUNT(CASE WHEN price >= 1000000 THEN 1 END) AS rank3_bids,
    MIN(price) AS min_price, MAX(price) AS max_price, AVG(CAST(price AS DOUBLE)) AS avg_price,
    SUM(price) AS sum_price
FROM bid
GROUP BY auction, CAST(date_time AS DATE);
