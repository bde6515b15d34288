-- Checks SESSION windows per key: a session is a run of a key's rows whose
-- times follow each other by less than the gap (10 s), from its first time
-- to its last plus the gap; a row that bridges two sessions merges them, a
-- deleted row splits one, and a row with a NULL time is in no session.
CREATE TABLE clicks (id INT PRIMARY KEY, usr TEXT, at TIMESTAMP);
INSERT INTO clicks VALUES
    (1, 'ann', '2024-01-01 10:00:00'), (2, 'ann', '2024-01-01 10:00:05'),
    (3, 'ann', '2024-01-01 10:00:20'), (4, 'bob', '2024-01-01 10:00:03'),
    (5, 'bob', '2024-01-01 10:00:13'), (6, 'bob', NULL);

CREATE MATERIALIZED VIEW sessions AS
SELECT usr, window_start, window_end, COUNT(*) AS clicks
FROM SESSION(clicks, at, INTERVAL '10' SECOND, usr)
GROUP BY usr, window_start, window_end;
-- run
-- ann's 10:00:12 bridges her two sessions; bob's 10:00:13 (a session of its
-- own: exactly the gap after 10:00:03) goes; his click without a time gets one.
INSERT INTO clicks VALUES (7, 'ann', '2024-01-01 10:00:12');
DELETE FROM clicks WHERE id = 5;
UPDATE clicks SET at = '2024-01-01 10:00:30' WHERE id = 6;
