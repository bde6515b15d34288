-- Nexmark q19: auction top-10 price. The ten highest bids of each auction, ranked.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q19 AS
SELECT *
FROM (
    SELECT auction, bidder, price, date_time,
        ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
) AS ranked
WHERE rank_number <= 10;
