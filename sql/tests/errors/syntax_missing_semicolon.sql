-- Two statements without a ';' between them.
CREATE TABLE t (id INT PRIMARY KEY)
CREATE TABLE u (id INT PRIMARY KEY);
