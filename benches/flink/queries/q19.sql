-- Nexmark q19 (sql/nexmark/q19.sql): auction top-10 price. The ten highest bids
-- of each auction, ranked. Same semantics, except for ties on price across
-- the 10th place: Millpond breaks them by the whole row, Flink by arrival.
CREATE TEMPORARY VIEW nexmark_q19 AS
SELECT *
FROM (
    SELECT auction, bidder, price, date_time,
        ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
) AS ranked
WHERE rank_number <= 10;
