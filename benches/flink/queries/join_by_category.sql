-- benches/state/join_by_category.sql: bids joined with their auction, counted per
-- category. Same semantics (regular join, updating aggregate).
CREATE TEMPORARY VIEW cat_stats AS
SELECT A.category, COUNT(*) AS bids, SUM(B.price) AS volume
FROM bid B JOIN auction A ON A.id = B.auction
GROUP BY A.category;
