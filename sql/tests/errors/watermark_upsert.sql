-- A WATERMARK is for an append-only source: an upserted row may change.
CREATE SOURCE s (id INT, at TIMESTAMP, WATERMARK FOR at AS at) FROM TOPIC 's' FORMAT JSON ENVELOPE UPSERT KEY (id);
