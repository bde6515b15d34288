-- Checks TUMBLE windows over a source: each row in exactly one window
-- [start, start + size), a row on a boundary opens the next window,
-- window_start/window_end in GROUP BY and in the output, a row with a
-- NULL time is in no window, and a window over a table.
CREATE SOURCE bids (auction INT, price INT, at TIMESTAMP) FROM TOPIC 'bids' FORMAT JSON;
CREATE TABLE readings (id INT PRIMARY KEY, at TIMESTAMP, v INT);
INSERT INTO readings VALUES (1, '2024-01-01 10:00:59', 1), (2, '2024-01-01 10:01:00', 2), (3, '2024-01-01 10:02:30', 3);

CREATE MATERIALIZED VIEW per_10s AS
SELECT window_start, window_end, COUNT(*) AS bids, SUM(price) AS volume
FROM TUMBLE(bids, at, INTERVAL '10' SECOND)
GROUP BY window_start, window_end;

CREATE MATERIALIZED VIEW per_auction_minute AS
SELECT auction, window_start, MAX(price) AS top
FROM TUMBLE(bids, at, INTERVAL '1 minute') AS w
GROUP BY auction, window_start;

CREATE MATERIALIZED VIEW windowed_rows AS
SELECT r.id, r.window_start FROM TUMBLE(readings, at, INTERVAL '1' MINUTE) AS r;

-- topic: bids
-- record: {"auction": 1, "price": 10, "at": "2024-01-01T10:00:00Z"}
-- record: {"auction": 1, "price": 30, "at": "2024-01-01T10:00:09.999"}
-- record: {"auction": 2, "price": 5, "at": "2024-01-01 10:00:10"}
-- record: {"auction": 1, "price": 20, "at": 1704103215000}
-- record: {"auction": 2, "price": 7, "at": "2024-01-01T10:01:00"}
-- record: {"auction": 2, "price": 1, "at": null}
