-- Nexmark q6 (sql/nexmark/q6.sql): average selling price by seller. The mean
-- winning price of each seller's last 10 auctions (by expiry; every auction
-- with a bid in its open interval counts). Same semantics; AVG cast to DOUBLE
-- as Millpond's. Ties in the ORDER BY are broken by id in both.
CREATE TEMPORARY VIEW nexmark_q6 AS
SELECT seller, AVG(CAST(final AS DOUBLE)) AS avg_final
FROM (
    SELECT seller, final, ROW_NUMBER() OVER (PARTITION BY seller ORDER BY expires DESC, id DESC) AS rn
    FROM (
        SELECT A.id, A.seller, A.expires, MAX(B.price) AS final
        FROM auction A JOIN bid B ON A.id = B.auction
        WHERE B.date_time BETWEEN A.date_time AND A.expires
        GROUP BY A.id, A.seller, A.expires
    ) AS closed
) AS ranked
WHERE rn <= 10
GROUP BY seller;
