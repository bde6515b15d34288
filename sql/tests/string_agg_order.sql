-- string_agg(x, sep ORDER BY ...): the values in the ORDER BY's order (ties
-- by the value), DISTINCT with ORDER BY on its argument, a FILTER; the view
-- follows updates and deletes. COUNT(DISTINCT a, b) counts the distinct
-- tuples with no NULL member; other aggregates accept an ORDER BY and
-- ignore it. array_agg keeps NULL elements, in the array's text form.
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, s TEXT, n INT, m INT);
INSERT INTO t VALUES
    (1, 'a', 'pear', 3, 1),
    (2, 'a', 'apple', 1, 1),
    (3, 'a', 'fig', NULL, 2),
    (4, 'a', NULL, 2, 2),
    (5, 'a', 'apple', 5, NULL),
    (6, 'b', 'kiwi', 1, 1),
    (7, 'c', NULL, NULL, NULL);

CREATE MATERIALIZED VIEW ordered AS
SELECT g,
       string_agg(s, ',' ORDER BY n DESC) AS by_n_desc,
       string_agg(s, ',' ORDER BY n NULLS FIRST, id) AS by_n_nulls_first,
       string_agg(DISTINCT s, '|' ORDER BY s DESC) AS distinct_desc,
       string_agg(s, ',' ORDER BY id) FILTER (WHERE n > 1) AS big,
       COUNT(DISTINCT n, m) AS pairs,
       SUM(n ORDER BY id) AS total,
       array_agg(s ORDER BY id) AS s_by_id,
       array_agg(n) AS ns,
       array_agg(DISTINCT s) AS distinct_s
FROM t GROUP BY g;

UPDATE t SET n = 10 WHERE id = 2;
DELETE FROM t WHERE id = 5;
INSERT INTO t VALUES (8, 'b', 'lime', 1, 1), (9, 'b', 'red apple', 2, NULL), (10, 'b', 'null', 3, NULL);
