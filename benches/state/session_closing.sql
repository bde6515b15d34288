-- The same q11 under a 5-second watermark: each session emitted once when
-- the watermark passes its end, its rows deleted
-- (millpond_dataflow::session_window).
CREATE SOURCE IF NOT EXISTS bid_w (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT,
    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW windowed AS
SELECT bidder, COUNT(*) AS bid_count, window_start, window_end
FROM SESSION(bid_w, date_time, INTERVAL '10' SECOND, bidder) GROUP BY bidder, window_start, window_end;
