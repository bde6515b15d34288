-- Nexmark q5 (sql/nexmark/q5.sql): hot items. The auctions with the most bids in
-- each 10-second window, sliding every 2 seconds.
-- Same semantics as Millpond's HOP, which is no watermark-driven window but a
-- row expansion: each bid goes to the 5 windows [s, s + 10 s) that contain
-- it, s a multiple of 2 s since 1970, and the counts are ordinary updating
-- aggregates. Flink's HOP window TVF would need a watermark and emit only
-- closed windows, so the windows are spelled out here (CROSS JOIN UNNEST)
-- in a WITH over bid_raw, whose date_time is the JSON's milliseconds.
CREATE TEMPORARY VIEW nexmark_q5 AS
WITH bid_hop AS (
SELECT auction,
    CAST(TO_TIMESTAMP_LTZ(start_ms, 3) AS TIMESTAMP(3)) AS window_start,
    CAST(TO_TIMESTAMP_LTZ(start_ms + 10000, 3) AS TIMESTAMP(3)) AS window_end
FROM (
    SELECT auction, date_time - MOD(date_time, 2000) - K.k * 2000 AS start_ms
    FROM bid_raw CROSS JOIN UNNEST(ARRAY[0, 1, 2, 3, 4]) AS K(k)
))
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime
FROM (
    SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
    FROM bid_hop
    GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
    SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
    FROM (
        SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
        FROM bid_hop
        GROUP BY auction, window_start, window_end
    ) AS CountBids
    GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
   AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;
