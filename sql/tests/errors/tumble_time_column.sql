-- A window's time column must be a TIMESTAMP.
CREATE SOURCE bids (price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW v AS
SELECT window_start, COUNT(*) AS n
FROM TUMBLE(bids, price, INTERVAL '10' SECOND)
GROUP BY window_start;
