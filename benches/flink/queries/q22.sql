-- Nexmark q22 (sql/nexmark/q22.sql): get URL directories. The first three
-- directories of each bid's url. Same semantics: split_part(url, '/', n) is
-- COALESCE(SPLIT_INDEX(url, '/', n - 1), '') (see q21.sql).
CREATE TEMPORARY VIEW nexmark_q22 AS
SELECT auction, bidder, price, channel,
    COALESCE(SPLIT_INDEX(url, '/', 3), '') AS dir1,
    COALESCE(SPLIT_INDEX(url, '/', 4), '') AS dir2,
    COALESCE(SPLIT_INDEX(url, '/', 5), '') AS dir3
FROM bid;
