-- age() counts years and months, which intervals here do not hold.
CREATE TABLE t (id INT PRIMARY KEY, born TIMESTAMP, at TIMESTAMP);
CREATE MATERIALIZED VIEW v AS SELECT id, age(at, born) AS age FROM t;
