-- An INTERVAL whose text is not an interval.
CREATE SOURCE bids (price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW v AS SELECT price FROM bids WHERE at > TIMESTAMP '2024-01-01 00:00:00' + INTERVAL 'ten minutes';
