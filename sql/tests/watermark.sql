-- Checks a source's WATERMARK: a record is late when its time is below the
-- greatest time of the earlier records of its partition minus the delay
-- (5 s here); views leave late records out (dropped, or sent to the
-- source's dead-letter topic with late_rows = 'dead_letter'); a GROUP BY
-- over a TUMBLE or HOP window of the watermark column emits each window
-- once, final, when the watermark passes its end, and keeps no state for
-- it afterwards. The second phase resumes the views: the open windows
-- are found again in the state, the closed ones are not emitted twice.
CREATE SOURCE bids (auction INT, price INT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '5' SECOND) FROM TOPIC 'bids' FORMAT JSON;

-- Final windows only: a window appears once the watermark passes its end.
CREATE MATERIALIZED VIEW per_10s AS
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS volume
FROM TUMBLE(bids, at, INTERVAL '10' SECOND)
GROUP BY window_start, window_end;

-- Keyed by auction and the window's start (its end is start + size), with HAVING.
CREATE MATERIALIZED VIEW per_auction WITH (late_rows = 'dead_letter') AS
SELECT auction, window_start, MAX(price) AS top, COUNT(*) AS n
FROM TUMBLE(bids, at, INTERVAL '10' SECOND)
GROUP BY auction, window_start
HAVING COUNT(*) >= 1;

-- Sliding windows close at their own ends.
CREATE MATERIALIZED VIEW hopping AS
SELECT window_end, COUNT(*) AS bids
FROM HOP(bids, at, INTERVAL '10' SECOND, INTERVAL '20' SECOND)
GROUP BY window_end;

-- Cumulating windows (5 s steps over 20 s periods) close at their own ends.
CREATE MATERIALIZED VIEW cumulating AS
SELECT window_start, window_end, COUNT(*) AS bids, MAX(price) AS top
FROM CUMULATE(bids, at, INTERVAL '5' SECOND, INTERVAL '20' SECOND)
GROUP BY window_start, window_end;

-- Not windowed: the rows on time, maintained as they come.
CREATE MATERIALIZED VIEW on_time AS SELECT auction, price, at FROM bids;

-- topic: bids
-- record: {"auction": 1, "price": 10, "at": "2024-01-01 10:00:01"}
-- record: {"auction": 2, "price": 20, "at": "2024-01-01 10:00:08"}
-- record: {"auction": 1, "price": 30, "at": "2024-01-01 10:00:12"}
-- record: {"auction": 1, "price": 40, "at": "2024-01-01 10:00:16"}
-- record: {"auction": 2, "price": 99, "at": "2024-01-01 10:00:03"}
-- record: {"auction": 2, "price": 50, "at": "2024-01-01 10:00:11"}
-- record: {"auction": 1, "price": 60, "at": null}
-- record: {"auction": 1, "price": 70, "at": "2024-01-01 10:00:40"}
-- record: {"auction": 2, "price": 98, "at": "2024-01-01 10:00:29"}
-- run
-- topic: bids
-- record: {"auction": 2, "price": 80, "at": "2024-01-01 10:00:36"}
-- record: {"auction": 2, "price": 97, "at": "2024-01-01 10:00:30"}
-- record: {"auction": 1, "price": 90, "at": "2024-01-01 10:00:50"}
