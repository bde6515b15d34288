-- LATERAL names a table function: these are unnest, generate_series and pg_options_to_table.
CREATE TABLE t (id INT PRIMARY KEY, tags TEXT);
CREATE MATERIALIZED VIEW v AS SELECT id, w FROM t CROSS JOIN LATERAL regexp_split_to_table(tags, ',') AS w;
