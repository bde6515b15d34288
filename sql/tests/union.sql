-- Checks UNION (duplicates removed, within and across its inputs) and
-- UNION ALL (multiplicities kept), a chain of three inputs, columns named
-- by the first input, and an INT column meeting a DOUBLE one (the result
-- is DOUBLE) and a NULL.
CREATE TABLE a (id INT PRIMARY KEY, x INT);
CREATE TABLE b (id INT PRIMARY KEY, y INT, z DOUBLE);
INSERT INTO a VALUES (1, 1), (2, 2), (3, 2), (4, NULL);
INSERT INTO b VALUES (1, 2, 0.5), (2, 3, 1.5), (3, NULL, 2.0);

CREATE MATERIALIZED VIEW union_distinct AS SELECT x FROM a UNION SELECT y FROM b;
CREATE MATERIALIZED VIEW union_all AS SELECT x FROM a UNION ALL SELECT y FROM b;
CREATE MATERIALIZED VIEW union_three AS SELECT x AS v FROM a UNION ALL SELECT y FROM b UNION ALL SELECT 7;
CREATE MATERIALIZED VIEW widened AS SELECT x AS n FROM a WHERE x = 1 UNION ALL SELECT z FROM b WHERE z > 1;
CREATE MATERIALIZED VIEW with_null AS SELECT NULL AS v UNION SELECT x FROM a WHERE x = 1;
