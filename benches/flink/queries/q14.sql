-- Nexmark q14 (sql/nexmark/q14.sql): calculation. Bids priced in euros and
-- labelled by the time of day (UTC), without Nexmark's count_char UDF, as in
-- Millpond. Same semantics.
CREATE TEMPORARY VIEW nexmark_q14 AS
SELECT auction, bidder, 0.908 * price AS price,
    CASE
        WHEN EXTRACT(HOUR FROM date_time) >= 8 AND EXTRACT(HOUR FROM date_time) <= 18 THEN 'dayTime'
        WHEN EXTRACT(HOUR FROM date_time) <= 6 OR EXTRACT(HOUR FROM date_time) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bid_time_type,
    date_time, extra
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
