-- Checks an append-only JSON source: a missing field is NULL, fields not
-- declared are ignored, a TIMESTAMP is an ISO 8601 text or milliseconds
-- since 1970, DECIMAL reads numbers and numeric text, and a record that
-- does not decode (not JSON, or a field of the wrong type) goes to the
-- source's dead-letter topic instead of stopping the view (once, though
-- two views read the source).
CREATE SOURCE readings (sensor TEXT, at TIMESTAMP, value DECIMAL(8, 2), ok BOOLEAN)
    FROM TOPIC 'readings' FORMAT JSON;

CREATE MATERIALIZED VIEW all_readings AS SELECT sensor, at, value, ok FROM readings;
CREATE MATERIALIZED VIEW per_sensor AS SELECT sensor, COUNT(*) AS n, SUM(value) AS total FROM readings GROUP BY sensor;

-- topic: readings
-- record: {"sensor": "s1", "at": "2024-01-01T00:00:00Z", "value": 1.5, "ok": true}
-- record: {"sensor": "s1", "at": 1704067260000, "value": "2.25", "extra": [1, 2]}
-- record: {"sensor": "s2", "value": 10}
-- record: not json at all
-- record: {"sensor": 7, "value": 1}
