-- Checks subqueries in FROM: with and without an alias, with column
-- aliases, nested two deep, an aggregate over an aggregate, and a filter
-- on an aggregate's output from outside (like HAVING).
CREATE TABLE scores (id INT PRIMARY KEY, player TEXT, team TEXT, points INT);
INSERT INTO scores VALUES
    (1, 'ann', 'red', 10), (2, 'ann', 'red', 5), (3, 'bob', 'red', 7),
    (4, 'cat', 'blue', 20), (5, 'dan', 'blue', 1), (6, 'dan', 'blue', 2);

CREATE MATERIALIZED VIEW player_totals AS
SELECT player, total FROM (SELECT player, SUM(points) AS total FROM scores GROUP BY player) AS t WHERE total > 5;

CREATE MATERIALIZED VIEW renamed AS
SELECT who, pts FROM (SELECT player, points FROM scores WHERE team = 'blue') AS s (who, pts);

CREATE MATERIALIZED VIEW best_player_per_team AS
SELECT team, MAX(total) AS best, COUNT(*) AS players
FROM (SELECT team, player, SUM(points) AS total FROM scores GROUP BY team, player) AS per_player
GROUP BY team;

CREATE MATERIALIZED VIEW nested AS
SELECT doubled + 1 AS result
FROM (SELECT total * 2 AS doubled FROM (SELECT SUM(points) AS total FROM scores) AS a) AS b;

CREATE MATERIALIZED VIEW no_alias AS
SELECT player FROM (SELECT DISTINCT player FROM scores WHERE points >= 10);
