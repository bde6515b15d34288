-- Nexmark q4 (sql/nexmark/q4.sql): average price per category. The highest bid
-- of each auction among the bids made while it was open, averaged per category.
-- Same semantics: a regular join and two updating aggregates (no windows, no
-- watermarks). AVG of a BIGINT is a DOUBLE in Millpond, an integer in Flink:
-- the CAST keeps Millpond's.
CREATE TEMPORARY VIEW nexmark_q4 AS
SELECT Q.category, AVG(CAST(Q.final AS DOUBLE)) AS avg_final
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
