-- INSERT ... SELECT: the query returns one value per named column.
CREATE TABLE a (id INT PRIMARY KEY, name TEXT);
CREATE TABLE b (id INT PRIMARY KEY, name TEXT);
INSERT INTO b SELECT id FROM a;
