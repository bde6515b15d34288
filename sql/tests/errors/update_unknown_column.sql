-- UPDATE of a column the table does not have, with a suggestion.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
INSERT INTO t VALUES (1, 'ann');
UPDATE t SET nmae = 'bob' WHERE id = 1;
