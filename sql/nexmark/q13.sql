-- Nexmark q13: bounded side input join. Bids joined with a small side table, here a
-- Millpond table written with INSERT (applied once per data directory).
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE TABLE IF NOT EXISTS side_input (id BIGINT PRIMARY KEY, value TEXT);
INSERT INTO side_input VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four'),
    (5, 'five'), (6, 'six'), (7, 'seven'), (8, 'eight'), (9, 'nine');

CREATE MATERIALIZED VIEW nexmark_q13 AS
SELECT B.auction, B.bidder, B.price, B.date_time, S.value
FROM bid B JOIN side_input S ON B.auction % 10 = S.id;
