-- A per-auction 10-second TUMBLE without a watermark: every window's state
-- kept, its row updated as bids come (the baseline of watermark_ab.sh).
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW windowed AS
SELECT auction, window_start, window_end, COUNT(*) AS n, MAX(price) AS top
FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY auction, window_start, window_end;
