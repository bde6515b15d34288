-- Checks every aggregate: COUNT(*) counts rows, COUNT(col) skips NULLs,
-- COUNT(DISTINCT col), SUM/MIN/MAX/AVG of integers, decimals and doubles,
-- MIN/MAX of text and timestamps, and a group whose values are all NULL
-- (SUM, MIN, MAX and AVG are NULL, COUNT is 0).
CREATE TABLE m (id INT PRIMARY KEY, g TEXT, i INT, d DECIMAL(10, 2), f DOUBLE, s TEXT, t TIMESTAMP);
INSERT INTO m VALUES
    (1, 'a', 1, 1.10, 0.5, 'pear', '2024-01-02 00:00:00'),
    (2, 'a', 2, 2.25, 1.5, 'apple', '2024-01-01 00:00:00'),
    (3, 'a', 2, NULL, NULL, NULL, NULL),
    (4, 'a', NULL, 0.01, 2.0, 'zucchini', '2024-03-01 10:00:00'),
    (5, 'b', 10, 5.00, -1.0, 'fig', '2023-12-31 23:59:59'),
    (6, 'c', NULL, NULL, NULL, NULL, NULL);

CREATE MATERIALIZED VIEW counts AS
SELECT g, COUNT(*) AS rows_, COUNT(i) AS values_, COUNT(DISTINCT i) AS distinct_values, COUNT(s) AS texts
FROM m GROUP BY g;

CREATE MATERIALIZED VIEW sums AS
SELECT g, SUM(i) AS sum_i, SUM(d) AS sum_d, SUM(f) AS sum_f FROM m GROUP BY g;

CREATE MATERIALIZED VIEW extremes AS
SELECT g, MIN(i) AS min_i, MAX(i) AS max_i, MIN(d) AS min_d, MAX(f) AS max_f, MIN(s) AS min_s, MAX(s) AS max_s,
       MIN(t) AS first_t, MAX(t) AS last_t
FROM m GROUP BY g;

CREATE MATERIALIZED VIEW averages AS
SELECT g, AVG(i) AS avg_i, AVG(d) AS avg_d, AVG(f) AS avg_f FROM m GROUP BY g;

-- The same aggregate twice is computed once and shown twice.
CREATE MATERIALIZED VIEW overall AS
SELECT COUNT(*) AS n, COUNT(*) AS n_again, COUNT(DISTINCT g) AS groups, SUM(i) AS sum_i, AVG(i) AS avg_i FROM m;
