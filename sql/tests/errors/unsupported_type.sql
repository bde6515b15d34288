-- A column type Millpond does not have.
CREATE TABLE t (id INT PRIMARY KEY, tags JSON);
