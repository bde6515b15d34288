-- Checks LIKE and ILIKE: % and _ wildcards, the \ escape, NOT LIKE, and a
-- NULL operand (the row is dropped by WHERE either way).
CREATE TABLE words (w TEXT PRIMARY KEY);
INSERT INTO words VALUES ('apple'), ('Apricot'), ('banana'), ('grape'), ('50%'), ('500'), ('a_b'), ('axb');
CREATE TABLE maybe (id INT PRIMARY KEY, w TEXT);
INSERT INTO maybe VALUES (1, NULL), (2, 'apple');

CREATE MATERIALIZED VIEW starts_with_a AS SELECT w FROM words WHERE w LIKE 'a%';
CREATE MATERIALIZED VIEW starts_with_a_any_case AS SELECT w FROM words WHERE w ILIKE 'a%';
CREATE MATERIALIZED VIEW five_letters AS SELECT w FROM words WHERE w LIKE '_____';
CREATE MATERIALIZED VIEW percent_sign AS SELECT w FROM words WHERE w LIKE '%\%';
CREATE MATERIALIZED VIEW underscore AS SELECT w FROM words WHERE w LIKE 'a\_b';
CREATE MATERIALIZED VIEW no_a AS SELECT w FROM words WHERE w NOT LIKE '%a%';
CREATE MATERIALIZED VIEW like_null AS SELECT id, w LIKE 'a%' AS matches FROM maybe;
