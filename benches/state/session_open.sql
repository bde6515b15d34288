-- Nexmark q11 (bids per bidder per 10-second session) without a watermark:
-- every session maintained as its rows come, bridged sessions retracted
-- and emitted again, every row kept.
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE MATERIALIZED VIEW windowed AS
SELECT bidder, COUNT(*) AS bid_count, window_start, window_end
FROM SESSION(bid, date_time, INTERVAL '10' SECOND, bidder) GROUP BY bidder, window_start, window_end;
