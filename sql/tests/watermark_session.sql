-- Checks SESSION windows under a source's WATERMARK (delay 5 s): a
-- session (per key, rows less than the gap apart, 10 s here) is emitted
-- once, final, when the watermark passes its end (its last time plus the
-- gap), and its rows are then forgotten; a session still open is not in
-- the views. Late records are in no session. The second phase resumes the
-- views: an open session found again in the state grows and closes, a
-- row that bridges two open sessions merges them, and the sessions closed
-- before the restart are not emitted twice.
CREATE SOURCE bids (bidder INT, price INT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '5' SECOND) FROM TOPIC 'bids' FORMAT JSON;

-- Nexmark q11: bids per bidder per session.
CREATE MATERIALIZED VIEW per_session AS
SELECT bidder, COUNT(*) AS bids, window_start, window_end
FROM SESSION(bids, at, INTERVAL '10' SECOND, bidder)
GROUP BY bidder, window_start, window_end;

-- Each row of a closed session, with its bounds.
CREATE MATERIALIZED VIEW session_rows AS
SELECT bidder, price, window_start, window_end
FROM SESSION(bids, at, INTERVAL '10' SECOND, bidder);

-- Sessions over every bidder at once (no key).
CREATE MATERIALIZED VIEW busy AS
SELECT window_start, window_end, COUNT(*) AS bids, MAX(price) AS top
FROM SESSION(bids, at, INTERVAL '10' SECOND)
GROUP BY window_start, window_end;

-- Grouped by the start only: still final (its input is), kept as usual.
CREATE MATERIALIZED VIEW by_start AS
SELECT bidder, window_start, SUM(price) AS spent
FROM SESSION(bids, at, INTERVAL '10' SECOND, bidder)
GROUP BY bidder, window_start;

-- topic: bids
-- record: {"bidder": 1, "price": 10, "at": "2024-01-01 10:00:00"}
-- record: {"bidder": 1, "price": 11, "at": "2024-01-01 10:00:05"}
-- record: {"bidder": 2, "price": 20, "at": "2024-01-01 10:00:02"}
-- record: {"bidder": 2, "price": 21, "at": "2024-01-01 10:00:20"}
-- record: {"bidder": 2, "price": 22, "at": "2024-01-01 10:00:14"}
-- record: {"bidder": 1, "price": 12, "at": "2024-01-01 10:00:30"}
-- record: {"bidder": 1, "price": 99, "at": "2024-01-01 10:00:01"}
-- record: {"bidder": 2, "price": 23, "at": null}
-- record: {"bidder": 3, "price": 30, "at": "2024-01-01 10:00:45"}
-- run
-- topic: bids
-- record: {"bidder": 3, "price": 31, "at": "2024-01-01 10:00:52"}
-- record: {"bidder": 3, "price": 98, "at": "2024-01-01 10:00:38"}
-- record: {"bidder": 4, "price": 40, "at": "2024-01-01 10:01:10"}
-- record: {"bidder": 5, "price": 50, "at": "2024-01-01 10:01:20"}
-- record: {"bidder": 5, "price": 51, "at": "2024-01-01 10:01:31"}
-- record: {"bidder": 5, "price": 52, "at": "2024-01-01 10:01:27"}
-- record: {"bidder": 6, "price": 60, "at": "2024-01-01 10:02:00"}
