-- Nexmark q10: log to file system. Each bid with the date and the minute it
-- was made, the columns Flink partitions its files by (dt, hm). The files are
-- the sink's business: here the view is the changelog topic view.nexmark_q10,
-- which `millpond subscribe` streams out, or CREATE SINK ships to Kafka.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q10 AS
SELECT auction, bidder, price, date_time, extra,
    to_char(date_time, 'YYYY-MM-DD') AS dt,
    to_char(date_time, 'HH24:MI') AS hm
FROM bid;
