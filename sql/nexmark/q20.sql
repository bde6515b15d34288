-- Nexmark q20: expand bid with auction. Bids on category-10 auctions, with the
-- auction's details.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q20 AS
SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_date_time,
    A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS auction_date_time, A.expires,
    A.seller, A.category
FROM bid B INNER JOIN auction A ON B.auction = A.id
WHERE A.category = 10;
