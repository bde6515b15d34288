CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
-- Nexmark q19's shape: the 10 highest bids of every auction.
CREATE MATERIALIZED VIEW top_bids AS
SELECT *
FROM (
    SELECT auction, bidder, price,
        ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
) AS ranked
WHERE rank_number <= 10;
