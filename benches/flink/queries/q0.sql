-- Nexmark q0 (sql/nexmark/q0.sql): passthrough. Every bid, as it arrives.
-- Same semantics. Tables person, auction and bid (times as TIMESTAMP(3), UTC)
-- are declared by NexmarkFlink; each view created here is one output.
CREATE TEMPORARY VIEW nexmark_q0 AS
SELECT auction, bidder, price, date_time, extra FROM bid;
