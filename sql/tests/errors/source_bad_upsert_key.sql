-- An upsert key must name a declared column.
CREATE SOURCE users (id INT, name TEXT) FROM TOPIC 'users' FORMAT JSON ENVELOPE UPSERT KEY (user_id);
