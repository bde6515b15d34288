-- A second row with the same primary key.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
INSERT INTO t VALUES (1, 'ann');
INSERT INTO t VALUES (2, 'bob'), (1, 'again');
