-- Nexmark q21 (sql/nexmark/q21.sql): add channel id. Each bid with its channel's
-- id: known channels by name, others from the url's channel_id parameter.
-- Same semantics: Millpond's split_part(s, sep, n) (1-based, '' past the
-- end) is COALESCE(SPLIT_INDEX(s, sep, n - 1), '') (0-based, NULL past the end).
CREATE TEMPORARY VIEW nexmark_q21 AS
SELECT auction, bidder, price, channel,
    CASE
        WHEN LOWER(channel) = 'apple' THEN '0'
        WHEN LOWER(channel) = 'google' THEN '1'
        WHEN LOWER(channel) = 'facebook' THEN '2'
        WHEN LOWER(channel) = 'baidu' THEN '3'
        ELSE NULLIF(COALESCE(SPLIT_INDEX(COALESCE(SPLIT_INDEX(url, 'channel_id=', 1), ''), '&', 0), ''), '')
    END AS channel_id
FROM bid
WHERE COALESCE(SPLIT_INDEX(COALESCE(SPLIT_INDEX(url, 'channel_id=', 1), ''), '&', 0), '') <> ''
    OR LOWER(channel) IN ('apple', 'google', 'facebook', 'baidu');
