-- RANGE frames with INTERVAL offsets over a TIMESTAMP (SQLite has none, so
-- this file pins them): the rows within an hour before, and within half
-- an hour either side in descending order; a NULL time is a peer of NULLs
-- only; the view follows an update and a delete.
CREATE TABLE m (id INT PRIMARY KEY, at TIMESTAMP, v INT);
INSERT INTO m VALUES
    (1, '2024-01-01 00:00:00', 1),
    (2, '2024-01-01 00:30:00', 2),
    (3, '2024-01-01 01:00:00', 4),
    (4, '2024-01-01 02:00:01', 8),
    (5, NULL, 16),
    (6, '2024-01-01 01:00:00', 32);

CREATE MATERIALIZED VIEW hourly AS
SELECT id,
       SUM(v) OVER (ORDER BY at RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS last_hour,
       COUNT(*) OVER (ORDER BY at DESC RANGE BETWEEN INTERVAL '30' MINUTE PRECEDING AND INTERVAL '30' MINUTE FOLLOWING) AS around
FROM m;

UPDATE m SET at = '2024-01-01 01:30:00' WHERE id = 4;
DELETE FROM m WHERE id = 1;
