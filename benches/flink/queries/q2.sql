-- Nexmark q2 (sql/nexmark/q2.sql): selection. The bids on every 123rd auction.
-- Same semantics (MOD for %).
CREATE TEMPORARY VIEW nexmark_q2 AS
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
