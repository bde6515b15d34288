-- The record timestamp's column needs a name of its own.
CREATE SOURCE s (id INT, seen TIMESTAMP) FROM TOPIC 's' FORMAT JSON INCLUDE TIMESTAMP AS seen;
