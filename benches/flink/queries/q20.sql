-- Nexmark q20 (sql/nexmark/q20.sql): expand bid with auction. Bids on
-- category-10 auctions, with the auction's details. Same semantics (a
-- regular join).
CREATE TEMPORARY VIEW nexmark_q20 AS
SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_date_time,
    A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS auction_date_time, A.expires,
    A.seller, A.category
FROM bid B INNER JOIN auction A ON B.auction = A.id
WHERE A.category = 10;
