-- benches/state/three_views.sql: by_auction, join_by_category and
-- by_bidder_auction in one file. Same semantics; as in Millpond, the three
-- views are one job whose bid source is read once (the planner shares the scan).
CREATE TEMPORARY VIEW auction_stats AS
SELECT auction, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top FROM bid GROUP BY auction;
CREATE TEMPORARY VIEW cat_stats AS
SELECT A.category, COUNT(*) AS bids, SUM(B.price) AS volume
FROM bid B JOIN auction A ON A.id = B.auction
GROUP BY A.category;
CREATE TEMPORARY VIEW pair_stats AS
SELECT bidder, auction, COUNT(*) AS bids, SUM(price) AS volume FROM bid GROUP BY bidder, auction;
