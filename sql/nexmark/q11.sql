-- Nexmark q11: user sessions. How many bids each bidder makes in each of
-- their sessions: a session ends after 10 seconds without a bid of theirs.
-- SESSION(source, time, gap, key...) gives each bid its session's start and
-- end among the bids with its key; a bid that bridges two sessions merges them
-- (their rows are retracted and counted again). Over a source with a
-- WATERMARK (benches/state/session_closing.sql), each session is emitted once,
-- final, when the watermark passes its end, and its rows are forgotten.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q11 AS
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM SESSION(bid, date_time, INTERVAL '10' SECOND, bidder)
GROUP BY bidder, window_start, window_end;
