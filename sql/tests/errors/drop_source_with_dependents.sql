-- DROP SOURCE of a source that a view reads.
CREATE SOURCE bids (price INT) FROM TOPIC 'bids' FORMAT JSON;
CREATE MATERIALIZED VIEW total AS SELECT SUM(price) AS s FROM bids;
DROP SOURCE bids;
