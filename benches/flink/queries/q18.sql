-- Nexmark q18 (sql/nexmark/q18.sql): find last bid. Each bidder's latest bid on
-- each auction. Same semantics, except for ties on date_time (same
-- millisecond): Millpond breaks them by the whole row, Flink's ROW_NUMBER by
-- arrival, so either keeps one of the tied bids.
CREATE TEMPORARY VIEW nexmark_q18 AS
SELECT auction, bidder, price, channel, url, date_time, extra
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number
    FROM bid
) AS ranked
WHERE rank_number <= 1;
