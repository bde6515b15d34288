-- Nexmark q6: average selling price by seller. The mean winning price of each
-- seller's last 10 auctions (by expiry). Nexmark's "closed" auctions are those
-- whose bids fall in their open interval: without processing time, every
-- auction with such bids counts.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, url TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'bid' FORMAT JSON;

CREATE MATERIALIZED VIEW nexmark_q6 AS
SELECT seller, AVG(final) AS avg_final
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
