-- Checks joins and aggregates over windows that close under watermarks:
-- Nexmark q8's join of two windowed aggregates over two sources with
-- different delays (each side's rows come when its own watermark closes
-- the window; the join deletes a window's rows once both watermarks have
-- passed its end), and an aggregate over a windowed aggregate (it closes
-- too: each window once). The second phase resumes the views.
CREATE SOURCE persons (id INT, name TEXT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '2' SECOND) FROM TOPIC 'persons' FORMAT JSON;
CREATE SOURCE auctions (id INT, seller INT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '4' SECOND) FROM TOPIC 'auctions' FORMAT JSON;

-- Nexmark q8: people who opened an auction in the window they registered in.
CREATE MATERIALIZED VIEW new_sellers AS
SELECT P.id, P.name, P.starttime
FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(persons, at, INTERVAL '10' SECOND) GROUP BY id, name, window_start, window_end) P
JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
      FROM TUMBLE(auctions, at, INTERVAL '10' SECOND) GROUP BY seller, window_start, window_end) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;

-- The most auctions one seller opened, per window.
CREATE MATERIALIZED VIEW top_seller AS
SELECT window_end, MAX(n) AS most, COUNT(*) AS sellers
FROM (SELECT seller, window_end, COUNT(*) AS n
      FROM TUMBLE(auctions, at, INTERVAL '10' SECOND) GROUP BY seller, window_end) s
GROUP BY window_end;

-- Each window's sellers in order: string_agg closes like the others.
CREATE MATERIALIZED VIEW sellers_per_window AS
SELECT window_start, string_agg(CAST(seller AS TEXT), ',' ORDER BY seller) AS sellers, COUNT(*) AS auctions
FROM TUMBLE(auctions, at, INTERVAL '10' SECOND)
GROUP BY window_start;

-- topic: persons
-- record: {"id": 1, "name": "ann", "at": "2024-01-01 10:00:01"}
-- record: {"id": 2, "name": "bob", "at": "2024-01-01 10:00:03"}
-- record: {"id": 3, "name": "cy", "at": "2024-01-01 10:00:12"}
-- record: {"id": 4, "name": "di", "at": "2024-01-01 10:00:25"}
-- topic: auctions
-- record: {"id": 100, "seller": 1, "at": "2024-01-01 10:00:05"}
-- record: {"id": 101, "seller": 2, "at": "2024-01-01 10:00:15"}
-- record: {"id": 107, "seller": 2, "at": "2024-01-01 10:00:16"}
-- record: {"id": 102, "seller": 3, "at": "2024-01-01 10:00:14"}
-- record: {"id": 103, "seller": 1, "at": "2024-01-01 10:00:08"}
-- run
-- topic: auctions
-- record: {"id": 104, "seller": 4, "at": "2024-01-01 10:00:26"}
-- record: {"id": 105, "seller": 3, "at": "2024-01-01 10:00:19"}
-- record: {"id": 106, "seller": 4, "at": "2024-01-01 10:00:40"}
-- topic: persons
-- record: {"id": 5, "name": "ed", "at": "2024-01-01 10:00:41"}
