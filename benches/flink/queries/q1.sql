-- Nexmark q1 (sql/nexmark/q1.sql): currency conversion. Each bid's price in euros.
-- Same semantics: 0.908 is a DECIMAL literal in both (Flink: DECIMAL(4, 3), so the
-- product has scale 3 where Millpond keeps 6 fractional digits; same values).
CREATE TEMPORARY VIEW nexmark_q1 AS
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
