-- Nexmark q15: bidding statistics report. Per day, bids, bidders and auctions in
-- three price ranks (FILTER (WHERE ...) written as CASE inside the aggregate).
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q15 AS
SELECT CAST(date_time AS DATE) AS day,
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
