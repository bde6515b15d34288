CREATE SOURCE IF NOT EXISTS auction (id BIGINT, category BIGINT, seller BIGINT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW cat_stats AS
SELECT A.category, COUNT(*) AS bids, SUM(B.price) AS volume
FROM bid B JOIN auction A ON A.id = B.auction
GROUP BY A.category;
