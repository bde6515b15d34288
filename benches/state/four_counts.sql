-- k cheap views over one topic: the source's read and JSON decode dominate,
-- so with one reader group the file costs about one view (issue 11, point 3).
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW by_auction AS SELECT auction, COUNT(*) AS bids FROM bid GROUP BY auction;
CREATE MATERIALIZED VIEW by_channel AS SELECT channel, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY channel;
CREATE MATERIALIZED VIEW expensive AS SELECT auction, COUNT(*) AS bids FROM bid WHERE price > 9000000 GROUP BY auction;
CREATE MATERIALIZED VIEW volume AS SELECT SUM(price) AS volume, COUNT(*) AS bids FROM bid;
