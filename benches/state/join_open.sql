-- Nexmark q8 (people who opened an auction in the 10-second window they
-- registered in) without a watermark: both windowed GROUP BYs and their
-- join keep every window's rows.
CREATE SOURCE IF NOT EXISTS person (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT) FROM TOPIC 'auction' FORMAT JSON;
CREATE MATERIALIZED VIEW windowed AS
SELECT P.id, P.name, P.starttime
FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(person, date_time, INTERVAL '10' SECOND) GROUP BY id, name, window_start, window_end) P
JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND) GROUP BY seller, window_start, window_end) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
