-- Checks a source with ENVELOPE UPSERT: the latest value per record key is
-- the row, a later value for a key replaces (retracts) the earlier one, a
-- tombstone deletes the row, a key written again after its tombstone comes
-- back, and a tombstone for a key never seen is harmless.
CREATE SOURCE users (id INT, name TEXT, plan TEXT)
    FROM TOPIC 'users' FORMAT JSON ENVELOPE UPSERT KEY (id);

CREATE MATERIALIZED VIEW current_users AS SELECT id, name, plan FROM users;
CREATE MATERIALIZED VIEW per_plan AS SELECT plan, COUNT(*) AS n FROM users GROUP BY plan;

-- topic: users
-- record 1: {"id": 1, "name": "ann", "plan": "free"}
-- record 2: {"id": 2, "name": "bob", "plan": "free"}
-- record 3: {"id": 3, "name": "cat", "plan": "pro"}
-- record 1: {"id": 1, "name": "ann", "plan": "pro"}
-- record 2: tombstone
-- record 9: tombstone
-- run
-- record 3: tombstone
-- record 3: {"id": 3, "name": "cat", "plan": "team"}
-- record 2: {"id": 2, "name": "bob", "plan": "pro"}
