-- A row with more values than the INSERT has columns.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
INSERT INTO t VALUES
    (1, 'ann'),
    (2, 'bob', 'extra');
