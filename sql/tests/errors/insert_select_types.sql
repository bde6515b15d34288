-- INSERT ... SELECT: a value of another type than the column's is refused.
CREATE TABLE a (id INT PRIMARY KEY, at TIMESTAMP);
CREATE TABLE b (id INT PRIMARY KEY, n INT);
INSERT INTO b SELECT id, at FROM a;
