-- Nexmark q13 (sql/nexmark/q13.sql): bounded side input join. Bids joined with a
-- 10-row side table on auction % 10. Same semantics: Millpond's side_input is
-- a table written with INSERT, here a VALUES list in a WITH, joined by a
-- regular join (Flink's own Nexmark q13 uses a processing-time lookup join).
CREATE TEMPORARY VIEW nexmark_q13 AS
WITH side_input AS (
    SELECT * FROM (VALUES (CAST(0 AS BIGINT), 'zero'), (CAST(1 AS BIGINT), 'one'), (CAST(2 AS BIGINT), 'two'),
        (CAST(3 AS BIGINT), 'three'), (CAST(4 AS BIGINT), 'four'), (CAST(5 AS BIGINT), 'five'),
        (CAST(6 AS BIGINT), 'six'), (CAST(7 AS BIGINT), 'seven'), (CAST(8 AS BIGINT), 'eight'),
        (CAST(9 AS BIGINT), 'nine')) AS T(id, `value`)
)
SELECT B.auction, B.bidder, B.price, B.date_time, S.`value`
FROM bid B JOIN side_input S ON MOD(B.auction, 10) = S.id;
