-- Nexmark q16 (sql/nexmark/q16.sql): channel statistics report. Per channel and
-- day (UTC), bids, bidders and auctions, and the latest minute with a bid.
-- Same semantics (FLOOR(... TO MINUTE) for date_trunc('minute', ...)).
CREATE TEMPORARY VIEW nexmark_q16 AS
SELECT channel, CAST(date_time AS DATE) AS `day`,
    MAX(FLOOR(date_time TO MINUTE)) AS last_minute,
    COUNT(*) AS total_bids,
    COUNT(CASE WHEN price < 10000 THEN 1 END) AS rank1_bids,
    COUNT(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 END) AS rank2_bids,
    COUNT(CASE WHEN price >= 1000000 THEN 1 END) AS rank3_bids,
    COUNT(DISTINCT bidder) AS total_bidders,
    COUNT(DISTINCT auction) AS total_auctions
FROM bid
GROUP BY channel, CAST(date_time AS DATE);
