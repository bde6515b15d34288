-- A HOP's size must be a multiple of its slide.
CREATE SOURCE bids (price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW v AS
SELECT window_start FROM HOP(bids, at, INTERVAL '10' SECOND, INTERVAL '25' SECOND);
