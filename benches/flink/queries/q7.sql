-- Nexmark q7 (sql/nexmark/q7.sql): highest bid. The bids with the highest price
-- of each 10-second window. Same semantics: Millpond's TUMBLE is a row
-- expansion (window_start = the time floored to 10 s since 1970), the MAX an
-- updating aggregate and the join a regular join on price; the window is
-- spelled out over bid_raw's milliseconds (see q5.sql).
CREATE TEMPORARY VIEW nexmark_q7 AS
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_end AS date_time
    FROM (
        SELECT price,
            CAST(TO_TIMESTAMP_LTZ(date_time - MOD(date_time, 10000), 3) AS TIMESTAMP(3)) AS window_start,
            CAST(TO_TIMESTAMP_LTZ(date_time - MOD(date_time, 10000) + 10000, 3) AS TIMESTAMP(3)) AS window_end
        FROM bid_raw
    )
    GROUP BY window_start, window_end
) B1 ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time;
