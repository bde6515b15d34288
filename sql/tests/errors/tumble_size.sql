-- A window's size is a positive INTERVAL constant.
CREATE SOURCE bids (price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW v AS SELECT window_start FROM TUMBLE(bids, at, 10);
