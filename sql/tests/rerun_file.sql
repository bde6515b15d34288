-- Checks that a file executed again (as `millpond run FILE.sql` does at
-- every start) changes nothing: its definitions are unchanged and each of
-- its INSERT, UPDATE and DELETE statements is applied once per data
-- directory. The second phase repeats the first one's statements.
CREATE TABLE t (id INT, v INT);
INSERT INTO t VALUES (1, 1);
INSERT INTO t VALUES (1, 1);
UPDATE t SET v = v + 1;
CREATE MATERIALIZED VIEW rows_ AS SELECT id, v FROM t;
-- run
CREATE TABLE t (id INT, v INT);
INSERT INTO t VALUES (1, 1);
INSERT INTO t VALUES (1, 1);
UPDATE t SET v = v + 1;
CREATE MATERIALIZED VIEW rows_ AS SELECT id, v FROM t;
