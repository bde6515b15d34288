-- late_rows is 'drop' or 'dead_letter'.
CREATE SOURCE s (at TIMESTAMP, WATERMARK FOR at AS at) FROM TOPIC 's' FORMAT JSON;
CREATE MATERIALIZED VIEW v WITH (late_rows = 'keep') AS SELECT at FROM s;
