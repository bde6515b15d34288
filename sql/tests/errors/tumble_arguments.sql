-- TUMBLE takes a source, a time column and a size.
CREATE SOURCE bids (price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW v AS SELECT window_start FROM TUMBLE(bids, at);
