-- Intervals of months have no fixed length.
CREATE SOURCE bids (price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW v AS SELECT at + INTERVAL '1' MONTH AS later FROM bids;
