CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT) FROM TOPIC 'bid' FORMAT JSON;
-- A pass-through view: every bid is one change of the changelog (issue 11, point 4).
CREATE MATERIALIZED VIEW all_bids AS SELECT auction, bidder, price, channel FROM bid;
