-- CREATE TABLE ... AS: the query's columns become the table's, so each needs its own name.
CREATE TABLE a (id INT PRIMARY KEY, n INT);
CREATE TABLE b AS SELECT id, n AS id FROM a;
