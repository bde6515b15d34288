CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW pair_stats AS
SELECT bidder, auction, COUNT(*) AS bids, SUM(price) AS volume FROM bid GROUP BY bidder, auction;
