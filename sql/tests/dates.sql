-- Checks dates, timestamps and intervals: literals, EXTRACT, DATE_TRUNC,
-- timestamp +/- interval, timestamp - timestamp, date +/- days, date - date,
-- CAST between them, comparisons of a timestamp column with a text
-- literal, and interval arithmetic and printing.
CREATE TABLE events (id INT PRIMARY KEY, at TIMESTAMP, day DATE, took INTERVAL);
INSERT INTO events VALUES
    (1, '2024-02-28 23:59:30', '2024-02-28', '90 seconds'),
    (2, '2024-12-31 12:00:00.25', '2024-12-31', '1 day'),
    (3, '2023-01-01 00:00:00', '2023-01-01', '-5 minutes'),
    (4, NULL, NULL, NULL);

CREATE MATERIALIZED VIEW parts AS
SELECT id,
       EXTRACT(YEAR FROM at) AS year,
       EXTRACT(MONTH FROM at) AS month,
       EXTRACT(DAY FROM at) AS day_of_month,
       EXTRACT(HOUR FROM at) AS hour,
       EXTRACT(SECOND FROM at) AS second,
       DATE_TRUNC('hour', at) AS hour_start,
       DATE_TRUNC('month', at) AS month_start,
       CAST(at AS DATE) AS at_date
FROM events;

CREATE MATERIALIZED VIEW shifted AS
SELECT id,
       at + took AS finished,
       at - INTERVAL '1' HOUR AS hour_before,
       at + INTERVAL '1 day 2 hours' AS later,
       day + 1 AS next_day,
       day - DATE '2023-01-01' AS days_since_2023,
       at - TIMESTAMP '2023-01-01 00:00:00' AS since_2023,
       took * 2 AS took_twice
FROM events;

CREATE MATERIALIZED VIEW in_2024 AS
SELECT id FROM events WHERE at >= '2024-01-01' AND at < TIMESTAMP '2025-01-01 00:00:00';
