-- Nexmark q15 (sql/nexmark/q15.sql): bidding statistics report. Per day (UTC),
-- bids, bidders and auctions in three price ranks. Same semantics (CASE inside
-- the aggregates, as Millpond writes FILTER (WHERE ...)).
CREATE TEMPORARY VIEW nexmark_q15 AS
SELECT CAST(date_time AS DATE) AS `day`,
    COUNT(*) AS total_bids,
    COUNT(CASE WHEN price < 10000 THEN 1 END) AS rank1_bids,
    COUNT(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 END) AS rank2_bids,
    COUNT(CASE WHEN price >= 1000000 THEN 1 END) AS rank3_bids,
    COUNT(DISTINCT bidder) AS total_bidders,
    COUNT(DISTINCT CASE WHEN price < 10000 THEN bidder END) AS rank1_bidders,
    COUNT(DISTINCT CASE WHEN price >= 10000 AND price < 1000000 THEN bidder END) AS rank2_bidders,
    COUNT(DISTINCT CASE WHEN price >= 1000000 THEN bidder END) AS rank3_bidders,
    COUNT(DISTINCT auction) AS total_auctions,
    COUNT(DISTINCT CASE WHEN price < 10000 THEN auction END) AS rank1_auctions,
    COUNT(DISTINCT CASE WHEN price >= 10000 AND price < 1000000 THEN auction END) AS rank2_auctions,
    COUNT(DISTINCT CASE WHEN price >= 1000000 THEN auction END) AS rank3_auctions
FROM bid
GROUP BY CAST(date_time AS DATE);
