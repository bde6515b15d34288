-- benches/state/by_auction.sql: per-auction bid count, volume and top price.
-- Same semantics (an updating aggregate keyed by auction).
CREATE TEMPORARY VIEW auction_stats AS
SELECT auction, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top FROM bid GROUP BY auction;
