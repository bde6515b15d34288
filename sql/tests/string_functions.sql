-- Checks the string functions: LOWER, UPPER, LENGTH (characters, not
-- bytes), SUBSTRING in both syntaxes, TRIM/LTRIM/RTRIM (also of given
-- characters), REPLACE, CONCAT (skips NULLs) and || (NULL if either side
-- is), STRPOS and POSITION, SPLIT_PART, and NULL arguments.
CREATE TABLE t (id INT PRIMARY KEY, s TEXT);
INSERT INTO t VALUES (1, '  Hello World  '), (2, 'a,b,,c'), (3, 'crème brûlée'), (4, NULL);

CREATE MATERIALIZED VIEW shapes AS
SELECT id,
       LOWER(s) AS lower,
       UPPER(s) AS upper,
       LENGTH(s) AS length,
       TRIM(s) AS trimmed,
       LTRIM(s) AS ltrimmed,
       RTRIM(s) AS rtrimmed,
       '[' || s || ']' AS bracketed,
       CONCAT('<', s, '>') AS concatenated
FROM t;

CREATE MATERIALIZED VIEW parts AS
SELECT id,
       SUBSTRING(s, 3, 5) AS sub_3_5,
       SUBSTRING(s FROM 4) AS sub_from_4,
       SUBSTR(s, 0, 3) AS sub_0_3,
       REPLACE(s, 'l', 'L') AS replaced,
       STRPOS(s, 'b') AS strpos_b,
       POSITION('o' IN s) AS position_o,
       SPLIT_PART(s, ',', 3) AS part_3,
       SPLIT_PART(s, ',', 9) AS part_9,
       TRIM(BOTH ' Hd' FROM s) AS trim_chars
FROM t;
