-- Checks two sources declared over one topic with different columns: a
-- view that reads both (here a self-join) decodes each with its own
-- columns, and each source judges a record by its own declaration (what
-- is bad for one is a row of the other).
CREATE SOURCE narrow (id BIGINT) FROM TOPIC 'events' FORMAT JSON;
CREATE SOURCE wide (id BIGINT, label TEXT, weight BIGINT) FROM TOPIC 'events' FORMAT JSON;

CREATE MATERIALIZED VIEW paired AS
    SELECT n.id, w.label, w.weight FROM narrow n JOIN wide w ON n.id = w.id;
CREATE MATERIALIZED VIEW narrow_ids AS SELECT id FROM narrow;

-- topic: events
-- record: {"id": 1, "label": "one", "weight": 10}
-- record: {"id": 2, "label": "two"}
-- record: {"id": 3, "weight": "heavy"}
