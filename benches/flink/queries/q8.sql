-- Nexmark q8 (sql/nexmark/q8.sql): monitor new users. People who opened an
-- auction in the same 10-second window as they registered. Same semantics:
-- TUMBLE as a row expansion (see q7.sql) and regular aggregates and join.
CREATE TEMPORARY VIEW nexmark_q8 AS
SELECT P.id, P.name, P.starttime
FROM (
    SELECT id, name, window_start AS starttime, window_end AS endtime
    FROM (
        SELECT id, name,
            CAST(TO_TIMESTAMP_LTZ(date_time - MOD(date_time, 10000), 3) AS TIMESTAMP(3)) AS window_start,
            CAST(TO_TIMESTAMP_LTZ(date_time - MOD(date_time, 10000) + 10000, 3) AS TIMESTAMP(3)) AS window_end
        FROM person_raw
    )
    GROUP BY id, name, window_start, window_end
) P
JOIN (
    SELECT seller, window_start AS starttime, window_end AS endtime
    FROM (
        SELECT seller,
            CAST(TO_TIMESTAMP_LTZ(date_time - MOD(date_time, 10000), 3) AS TIMESTAMP(3)) AS window_start,
            CAST(TO_TIMESTAMP_LTZ(date_time - MOD(date_time, 10000) + 10000, 3) AS TIMESTAMP(3)) AS window_end
        FROM auction_raw
    )
    GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
