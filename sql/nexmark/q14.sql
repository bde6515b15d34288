-- Nexmark q14: calculation. Bids priced in euros and labelled by the time of day
-- (Nexmark's count_char UDF is left out: Millpond has no user functions).
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q14 AS
SELECT auction, bidder, 0.908 * price AS price,
    CASE
        WHEN EXTRACT(HOUR FROM date_time) >= 8 AND EXTRACT(HOUR FROM date_time) <= 18 THEN 'dayTime'
        WHEN EXTRACT(HOUR FROM date_time) <= 6 OR EXTRACT(HOUR FROM date_time) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bid_time_type,
    date_time, extra
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
