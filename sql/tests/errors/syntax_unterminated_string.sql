-- The tokenizer's error: a string literal without its closing quote.
CREATE TABLE t (id INT PRIMARY KEY, name TEXT);
INSERT INTO t VALUES (1, 'ann);
