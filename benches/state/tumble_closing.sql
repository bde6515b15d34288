-- The same TUMBLE under a 5-second watermark: each window emitted once when
-- it closes, its state deleted (millpond_dataflow::event_time).
CREATE SOURCE IF NOT EXISTS bid_w (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT,
    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW windowed AS
SELECT auction, window_start, window_end, COUNT(*) AS n, MAX(price) AS top
FROM TUMBLE(bid_w, date_time, INTERVAL '10' SECOND) GROUP BY auction, window_start, window_end;
