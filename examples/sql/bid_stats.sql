-- The README's SQL example: per-auction bid statistics over the Nexmark
-- `bid` topic (`millpond gen nexmark` writes it), and a small table.
CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP)
    FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW bid_stats AS
    SELECT auction, COUNT(*) AS bids, SUM(price) AS volume, MAX(price) AS top
    FROM bid GROUP BY auction;

CREATE TABLE watched (auction BIGINT PRIMARY KEY, note TEXT);
INSERT INTO watched VALUES (1000, 'the first auction');

CREATE MATERIALIZED VIEW watched_stats AS
    SELECT w.auction, w.note, s.bids, s.top
    FROM watched w JOIN bid_stats s ON s.auction = w.auction;
