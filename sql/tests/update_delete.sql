-- Checks UPDATE and DELETE in the file that created the rows: each sees
-- the rows as the statements before it left them; UPDATE of a primary key
-- moves the row; an UPDATE reading its own columns uses the old values; a
-- DELETE or UPDATE matching nothing changes nothing.
CREATE TABLE accounts (id INT PRIMARY KEY, owner TEXT, balance INT);
INSERT INTO accounts VALUES (1, 'ann', 100), (2, 'bob', 50), (3, 'cat', 0), (4, 'dan', 10);
UPDATE accounts SET balance = balance + 5 WHERE balance < 60;
DELETE FROM accounts WHERE owner = 'cat';
UPDATE accounts SET id = 40, owner = UPPER(owner) WHERE id = 4;
UPDATE accounts SET balance = balance * 2, owner = owner || '!' WHERE id = 1;
DELETE FROM accounts WHERE id = 999;
UPDATE accounts SET balance = 0 WHERE owner = 'nobody';
INSERT INTO accounts VALUES (3, 'cat again', 1);

CREATE MATERIALIZED VIEW balances AS SELECT id, owner, balance FROM accounts;
CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n, SUM(balance) AS total FROM accounts;
