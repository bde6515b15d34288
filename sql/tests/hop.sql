-- Checks HOP (sliding) windows: with a 10 s slide and 30 s size each row
-- is in three windows, the first one starting up to 20 s before it; a
-- HOP whose size equals its slide is a TUMBLE.
CREATE SOURCE clicks (user_id TEXT, at TIMESTAMP) FROM TOPIC 'clicks' FORMAT JSON;

CREATE MATERIALIZED VIEW per_window AS
SELECT window_start, window_end, COUNT(*) AS clicks, COUNT(DISTINCT user_id) AS users
FROM HOP(clicks, at, INTERVAL '10' SECOND, INTERVAL '30' SECOND)
GROUP BY window_start, window_end;

CREATE MATERIALIZED VIEW as_tumble AS
SELECT window_start, COUNT(*) AS clicks
FROM HOP(clicks, at, INTERVAL '1' MINUTE, INTERVAL '1' MINUTE)
GROUP BY window_start;

-- topic: clicks
-- record: {"user_id": "u1", "at": "2024-05-01 12:00:05"}
-- record: {"user_id": "u2", "at": "2024-05-01 12:00:15"}
-- record: {"user_id": "u1", "at": "2024-05-01 12:00:31"}
