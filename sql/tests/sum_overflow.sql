-- A SUM past what its type holds is NULL (an overflow), never a wrapped
-- value, and it comes back exactly when rows leave: the sum is kept in 192
-- bits. DECIMAL(38,6) at its largest, twice, is past 38 digits (and past
-- i128); BIGINT sums past 2^63 are NULL too.
CREATE TABLE d (id INT PRIMARY KEY, g TEXT, x DECIMAL(38, 6));
INSERT INTO d VALUES (1, 'a', CAST('99999999999999999999999999999999.999999' AS DECIMAL(38, 6))),
    (2, 'a', CAST('99999999999999999999999999999999.999999' AS DECIMAL(38, 6))),
    (3, 'b', 5), (4, 'c', CAST('99999999999999999999999999999999.999999' AS DECIMAL(38, 6)));
CREATE TABLE i (id INT PRIMARY KEY, g TEXT, x BIGINT);
INSERT INTO i VALUES (1, 'a', 9223372036854775807), (2, 'a', 1), (3, 'b', -9223372036854775807);
CREATE MATERIALIZED VIEW dsum AS SELECT g, SUM(x) AS s, AVG(x) AS m, COUNT(*) AS n FROM d GROUP BY g;
CREATE MATERIALIZED VIEW isum AS SELECT g, SUM(x) AS s FROM i GROUP BY g;
-- run
DELETE FROM d WHERE id = 2;
DELETE FROM i WHERE id = 2;
