-- benches/state/by_bidder_auction.sql: per (bidder, auction) bid count and volume.
-- Same semantics.
CREATE TEMPORARY VIEW pair_stats AS
SELECT bidder, auction, COUNT(*) AS bids, SUM(price) AS volume FROM bid GROUP BY bidder, auction;
