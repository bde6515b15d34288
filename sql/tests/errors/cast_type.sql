-- A cast between types that do not convert.
CREATE TABLE t (id INT PRIMARY KEY, at TIMESTAMP);
CREATE MATERIALIZED VIEW v AS SELECT id, CAST(at AS BOOLEAN) AS flag FROM t;
