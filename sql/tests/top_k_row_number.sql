-- Checks ROW_NUMBER() top-k: per partition with rn <= k, rn < k and
-- rn = 1, descending order, ties broken deterministically (by the whole
-- row), NULLs first ascending and last descending, the rank selected or
-- not, and a top-k that follows retractions (a deleted leader is replaced).
CREATE TABLE bids (id INT PRIMARY KEY, auction INT, price INT);
INSERT INTO bids VALUES
    (1, 1, 10), (2, 1, 30), (3, 1, 20), (4, 1, 30),
    (5, 2, 5), (6, 2, NULL),
    (7, 3, 1);

CREATE MATERIALIZED VIEW top2 AS
SELECT auction, id, price, rn FROM (
    SELECT auction, id, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, id) AS rn FROM bids
) AS ranked WHERE rn <= 2;

CREATE MATERIALIZED VIEW lowest AS
SELECT auction, price FROM (
    SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price) AS rn FROM bids
) AS ranked WHERE rn = 1;

CREATE MATERIALIZED VIEW top3_overall AS
SELECT id, rn FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY price DESC NULLS LAST, id DESC) AS rn FROM bids) AS r
WHERE rn < 4;
-- run
DELETE FROM bids WHERE id = 2;
UPDATE bids SET price = 100 WHERE id = 5;
