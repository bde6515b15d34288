-- NULL in a primary key column.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
INSERT INTO t (name) VALUES ('nobody');
