-- Issue 11's "the first three views in one file": by_auction, join_by_category
-- and by_bidder_auction over one bid topic (point 3: one read and decode).
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, category BIGINT, seller BIGINT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW auction_stats AS
SELECT auction, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top FROM bid GROUP BY auction;
CREATE MATERIALIZED VIEW cat_stats AS
SELECT A.category, COUNT(*) AS bids, SUM(B.price) AS volume
FROM bid B JOIN auction A ON A.id = B.auction
GROUP BY A.category;
CREATE MATERIALIZED VIEW pair_stats AS
SELECT bidder, auction, COUNT(*) AS bids, SUM(price) AS volume FROM bid GROUP BY bidder, auction;
