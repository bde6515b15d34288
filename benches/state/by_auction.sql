CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW auction_stats AS
SELECT auction, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top FROM bid GROUP BY auction;
