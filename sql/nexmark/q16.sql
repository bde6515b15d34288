-- Nexmark q16: channel statistics report. Per channel and day, bids, bidders and
-- auctions, and the latest minute with a bid.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q16 AS
SELECT channel, CAST(date_time AS DATE) AS day,
    MAX(date_trunc('minute', date_time)) AS last_minute,
    COUNT(*) AS total_bids,
    COUNT(CASE WHEN price < 10000 THEN 1 END) AS rank1_bids,
    COUNT(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 END) AS rank2_bids,
    COUNT(CASE WHEN price >= 1000000 THEN 1 END) AS rank3_bids,
    COUNT(DISTINCT bidder) AS total_bidders,
    COUNT(DISTINCT auction) AS total_auctions
FROM bid
GROUP BY channel, CAST(date_time AS DATE);
