-- now() would make a view's rows depend on when it replays.
CREATE TABLE t (id INT PRIMARY KEY, at TIMESTAMP);
CREATE MATERIALIZED VIEW recent AS SELECT id FROM t WHERE at > now() - INTERVAL '1' HOUR;
