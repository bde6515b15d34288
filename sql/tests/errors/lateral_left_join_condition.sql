-- LEFT JOIN LATERAL keeps a row whose call gives no rows only with ON TRUE.
CREATE TABLE t (id INT PRIMARY KEY, n INT);
CREATE MATERIALIZED VIEW v AS SELECT id, g FROM t LEFT JOIN LATERAL generate_series(1, n) AS g ON g > 1;
