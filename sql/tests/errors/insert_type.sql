-- A value that does not convert to its column's type.
CREATE TABLE t (id INT PRIMARY KEY, born DATE);
INSERT INTO t VALUES (1, '2000-01-01'), (2, '2000-02-30');
