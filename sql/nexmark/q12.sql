-- Nexmark q12: processing-time windows. Bids per bidder in 10-second windows of
-- the time each bid reached the system. PROCTIME() (when an operator happens to
-- see a row) would make the view depend on when and how often it ran, where a
-- view must be the same function of the log on every replay (exactly once
-- across crashes); the time a bid reached the system is in the log: each
-- record's timestamp (the append's, for records appended here; the
-- producer's for Kafka clients, unless the topic logs append times), read with
-- INCLUDE TIMESTAMP by a second source over the bid topic.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid_arrivals (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON INCLUDE TIMESTAMP AS p_time;

CREATE MATERIALIZED VIEW nexmark_q12 AS
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TUMBLE(bid_arrivals, p_time, INTERVAL '10' SECOND)
GROUP BY bidder, window_start, window_end;
