-- Nexmark q17: auction statistics report. Per auction and day: bids by price rank
-- and price statistics.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q17 AS
SELECT auction, CAST(date_time AS DATE) AS day,
    COUNT(*) AS total_bids,
    COUNT(CASE WHEN price < 10000 THEN 1 END) AS rank1_bids,
    COUNT(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 END) AS rank2_bids,
    COUNT(CASE WHEN price >= 1000000 THEN 1 END) AS rank3_bids,
    MIN(price) AS min_price, MAX(price) AS max_price, AVG(price) AS avg_price, SUM(price) AS sum_price
FROM bid
GROUP BY auction, CAST(date_time AS DATE);
