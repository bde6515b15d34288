-- A watermark is its column minus a constant delay, not any expression.
CREATE SOURCE s (id INT, at TIMESTAMP, WATERMARK FOR at AS at + INTERVAL '5' SECOND) FROM TOPIC 's' FORMAT JSON;
