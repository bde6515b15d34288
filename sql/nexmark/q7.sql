-- Nexmark q7: highest bid. The bids with the highest price of each 10-second window.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q7 AS
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_end AS date_time
    FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
    GROUP BY window_start, window_end
) B1 ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time;
