-- The same q8 over sources with a 5-second watermark: each GROUP BY emits a
-- window once when it closes, and the join deletes a window's rows once
-- both watermarks passed its end (millpond_dataflow::window_join).
CREATE SOURCE IF NOT EXISTS person_w (id BIGINT, name TEXT, email_address TEXT, credit_card TEXT, city TEXT, state TEXT, date_time TIMESTAMP, extra TEXT,
    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) FROM TOPIC 'person' FORMAT JSON;
CREATE SOURCE IF NOT EXISTS auction_w (id BIGINT, item_name TEXT, description TEXT, initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra TEXT,
    WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) FROM TOPIC 'auction' FORMAT JSON;
CREATE MATERIALIZED VIEW windowed AS
SELECT P.id, P.name, P.starttime
FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(person_w, date_time, INTERVAL '10' SECOND) GROUP BY id, name, window_start, window_end) P
JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(auction_w, date_time, INTERVAL '10' SECOND) GROUP BY seller, window_start, window_end) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
