-- INSERT into a table that does not exist, with the closest table as a suggestion.
CREATE TABLE orders (id INT PRIMARY KEY);
INSERT INTO order VALUES (1);
