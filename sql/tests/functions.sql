-- The scalar function library, as PostgreSQL computes it; out of a
-- function's domain (sqrt(-1), ln(0), a negative power of zero) is NULL.
CREATE TABLE n (id INT PRIMARY KEY, x INT, d DECIMAL(10,3), f DOUBLE);
CREATE TABLE s (id INT PRIMARY KEY, t TEXT, ts TIMESTAMP);
INSERT INTO n VALUES (1, 16, 12.345, 2.5), (2, -7, -0.005, -1.5), (3, 0, 0, 0), (4, NULL, NULL, NULL);
INSERT INTO s VALUES (1, 'hello world', '2024-03-09 14:05:07.123'),
  (2, 'aBc-dEF 9x', '1999-12-31 23:59:59'), (3, '', '2024-01-01 00:00:00'), (4, NULL, NULL);
CREATE MATERIALIZED VIEW math AS
  SELECT id, sqrt(x) AS sqrt, cbrt(x) AS cbrt, power(x, 2) AS sq, power(x, -1) AS inv, ln(x) AS ln,
         log(x) AS log, log(2, x) AS log2, exp(f) AS exp, sign(x) AS sx, sign(d) AS sd, sign(f) AS sf,
         mod(x, 3) AS m, trunc(d, 2) AS td, trunc(f) AS tf, trunc(x, -1) AS tx, round(pi(), 4) AS pi
  FROM n;
CREATE MATERIALIZED VIEW text AS
  SELECT id, lpad(t, 13, '.') AS lp, rpad(t, 4) AS rp, lpad(t, 3) AS cut, left(t, 3) AS l, left(t, -3) AS lm,
         right(t, 2) AS r, reverse(t) AS rev, repeat(t, 2) AS rep, initcap(t) AS ic, ascii(t) AS a,
         chr(ascii(t) + 1) AS c, starts_with(t, 'he') AS sw,
         regexp_replace(t, '([a-z])([A-Z])', '\2\1') AS rx1, regexp_replace(t, '[aeiou]', '_', 'gi') AS rxg
  FROM s;
CREATE MATERIALIZED VIEW patterns AS
  SELECT id, t LIKE 'a#%' ESCAPE '#' AS esc1, t LIKE '%-d%' ESCAPE '' AS esc2, t SIMILAR TO '%(world|EF)%' AS sim,
         t SIMILAR TO '[a-z]+ [a-z]+' AS words, t NOT SIMILAR TO 'h%' AS not_h
  FROM s;
CREATE MATERIALIZED VIEW times AS
  SELECT id, to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS') AS iso, to_char(ts, 'FMDay, FMMonth FMDD, YYYY HH12:MI AM') AS long,
         to_char(ts, 'Dy DDD Q') AS short, date_part('year', ts) AS y, date_part('second', ts) AS sec,
         date_part('dow', ts) AS dow
  FROM s;
-- run
UPDATE n SET x = 81 WHERE id = 3;
UPDATE s SET t = 'a%b', ts = '2000-02-29 12:00:00' WHERE id = 3;
DELETE FROM n WHERE id = 2;
