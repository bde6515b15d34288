# Queries compared with SQLite by tests/sqlite.rs.
#
#   name: QUERY            a materialized view, compared after every phase
#   view name: QUERY       a plain view (CREATE VIEW), for later entries
#   sqlite: QUERY          what SQLite runs instead, where the two dialects
#                          or semantics legitimately differ (said why)
# Indented lines continue a query. Every entry is also a view in SQLite, so
# later entries may read earlier ones. SQLite stores timestamps as TEXT in
# the format views print; e_s and t1_s add their epoch seconds (es and ts_s
# truncated to whole seconds, ep exact).
#
# Schema (ours):
#   t1 (id INT PRIMARY KEY, a INT, b INT, c DOUBLE, d DECIMAL(10,2), s TEXT, ts TIMESTAMP)
#   t2 (k INT, x INT, y TEXT, c DOUBLE, day DATE)   no key, duplicate rows
#   t3 (k INT PRIMARY KEY, name TEXT, w INT)         a small dimension
#   t0 (a INT, b DOUBLE)                             always empty
#   t4 (a INT, b TEXT)                               4 rows, then none, then 1
#   u  (k INT, v INT, w TEXT)                        upsert source, tombstones
#   e  (id INT, k INT, amount INT, price DOUBLE, cat TEXT, ts TIMESTAMP, ok BOOLEAN)   append-only;
#      some ts have fractional seconds, and arrive as ISO 8601 'T...Z' text or epoch milliseconds

# --- Inputs as they are ----------------------------------------------------

all_t1: SELECT id, a, b, c, d, s, ts FROM t1
all_t2: SELECT * FROM t2
all_t3: SELECT * FROM t3
all_t4: SELECT * FROM t4
all_u: SELECT * FROM u
all_e: SELECT * FROM e
cols_reordered: SELECT s, id, ts, a FROM t1

# --- Arithmetic --------------------------------------------------------------

arith_int: SELECT id, a + b AS p, a - b AS m, a * b AS t, a / b AS q, a % b AS r FROM t1
arith_neg: SELECT id, -a AS n, a - -b AS mm, -(a + 1) * 2 AS x, +b AS pb FROM t1
arith_double: SELECT id, a + c AS p, c - b AS m, c * c AS sq, c / 2 AS h, c / b AS q FROM t1
arith_decimal: SELECT id, d + 1 AS p, d - a AS m, d * 2 AS t, d + c AS dc, -d AS n FROM t1
arith_decimal_literal: SELECT id, a + 1.5 AS p, a * 0.25 AS t, 2.5 - a AS m, b * 1.1 AS q FROM t1
# ours: DECIMAL division keeps 6 fractional digits (rounded half away from zero); SQLite divides floats.
arith_decimal_div: SELECT id, a / 3.0 AS q, d / 4 AS r, d / 3 AS s FROM t1
sqlite: SELECT id, ROUND(a / 3.0, 6), ROUND(d / 4, 6), ROUND(d / 3, 6) FROM t1
arith_div_zero: SELECT id, a / 0 AS q, a % 0 AS r, c / 0 AS cq, d / 0 AS dq, b / (a - a) AS z FROM t1
arith_precedence: SELECT id, a + b * 2 - a % 7 AS x, (a + b) * 2 AS y, a - b - 1 AS z, a / 2 * 2 AS w FROM t1
arith_literals: SELECT 1 + 2 AS three, 7 / 2 AS q, 7 % 3 AS r, -7 / 2 AS nq, -7 % 3 AS nr, 1.5 * 2 AS d, 2 * 3.5e0 AS f
arith_e: SELECT id, amount * price AS total, amount - k AS diff, price / amount AS unit FROM e
arith_u: SELECT k, v * 2 + k AS x, v % 7 AS r FROM u
arith_mod_neg: SELECT id, a % 7 AS r, (a - 50) % 7 AS s, (a - 50) / 7 AS q FROM t1

# --- Comparison and logic -------------------------------------------------

cmp_int: SELECT id, a < b AS lt, a <= b AS le, a = b AS eq, a <> b AS ne, a > b AS gt, a >= b AS ge, a != b AS ne2 FROM t1
cmp_mixed: SELECT id, a < c AS x, c = d AS y, d > 0.5 AS z, a = 5.0 AS w, c >= a AS v FROM t1
cmp_text: SELECT id, s < 'b' AS x, s = 'apple' AS y, s >= 'Apple' AS z, s > '' AS w FROM t1
cmp_ts: SELECT id, ts < '2024-03-11 00:00:00' AS x, ts >= TIMESTAMP '2024-03-12 12:00:00' AS y FROM t1
sqlite: SELECT id, ts < '2024-03-11 00:00:00', ts >= '2024-03-12 12:00:00' FROM t1
logic_and_or: SELECT id, a > 50 AND b < 30 AS x, a > 50 OR b < 30 AS y, NOT (a > 50) AS z FROM t1
logic_null: SELECT id, (a > 50 AND NULL) AS x, (a > 50 OR NULL) AS y, NOT (b IS NULL) AS z, (NULL AND FALSE) AS w FROM t1
logic_where: SELECT id FROM t1 WHERE NOT (a > 10 AND b > 10) OR s = 'fig'
logic_where_eq_bool: SELECT id, a, b FROM t1 WHERE (a > 20) = (b > 20)
logic_is_true: SELECT id, (a > b) IS TRUE AS t, (a > b) IS NOT FALSE AS nf, (a > b) IS FALSE AS f, (a > b) IS NOT TRUE AS nt FROM t1
logic_distinct_from: SELECT id, a IS DISTINCT FROM b AS d, a IS NOT DISTINCT FROM b AS nd, s IS DISTINCT FROM 'apple' AS sd FROM t1
logic_not_not: SELECT id FROM t1 WHERE NOT NOT (a > 30) AND NOT (s IS NULL)
logic_or_chain: SELECT id FROM e WHERE k = 1 OR k = 3 OR amount > 45 OR cat = 'date'

# --- NULL, BETWEEN, IN -----------------------------------------------------

null_tests: SELECT id, a IS NULL AS an, b IS NOT NULL AS bn, s IS NULL AS sn, ts IS NULL AS tn, d IS NULL AS dn FROM t1
null_where: SELECT id, a FROM t1 WHERE a IS NULL OR b IS NULL
null_arith: SELECT id, a + NULL AS x, NULL * c AS y, COALESCE(a, 0) + COALESCE(b, 0) AS z FROM t1
null_where_e: SELECT id, k, amount FROM e WHERE price IS NULL OR cat IS NULL OR ts IS NULL
between_const: SELECT id, a FROM t1 WHERE a BETWEEN 10 AND 50
not_between: SELECT id, a FROM t1 WHERE a NOT BETWEEN 10 AND 50
between_expr: SELECT id, a BETWEEN b AND b + 20 AS x, c BETWEEN -10 AND 10.5 AS y, s BETWEEN 'a' AND 'c' AS z FROM t1
between_ts: SELECT id FROM e WHERE ts BETWEEN '2024-03-10 12:00:00' AND '2024-03-11 12:00:00'
in_list: SELECT id, a IN (1, 2, 3, 50) AS x, a NOT IN (1, 2, 3) AS y, a IN (1, NULL) AS z, a NOT IN (5, NULL) AS w FROM t1
in_where: SELECT id, s FROM t1 WHERE s IN ('apple', 'banana', 'fig')
not_in_where: SELECT id, s FROM t1 WHERE s NOT IN ('apple', 'banana')
in_mixed: SELECT id FROM t1 WHERE c IN (1, 2.5, -3, 0) OR d IN (1.25, 0, 10)
in_expr: SELECT id, a % 4 IN (0, 1) AS x, upper(s) IN ('APPLE', 'FIG') AS y FROM t1
in_e: SELECT id, k FROM e WHERE k IN (2, 4, 6) AND cat NOT IN ('fig', 'date')

# --- CASE, COALESCE, NULLIF, CAST ---------------------------------------------

case_searched: SELECT id, CASE WHEN a < 10 THEN 'low' WHEN a < 50 THEN 'mid' ELSE 'high' END AS band FROM t1
case_no_else: SELECT id, CASE WHEN a > b THEN a WHEN b > a THEN b END AS m FROM t1
case_operand: SELECT id, CASE s WHEN 'apple' THEN 1 WHEN 'banana' THEN 2 WHEN NULL THEN 3 ELSE 0 END AS code FROM t1
case_operand_int: SELECT id, CASE a % 3 WHEN 0 THEN 'zero' WHEN 1 THEN 'one' END AS r FROM t1
case_types: SELECT id, CASE WHEN a > 10 THEN c WHEN a > 0 THEN a ELSE d END AS v FROM t1
case_null_cond: SELECT id, CASE WHEN NULL THEN 1 WHEN a IS NULL THEN 2 ELSE 3 END AS v FROM t1
case_nested: SELECT id, CASE WHEN s IS NULL THEN 'none' ELSE CASE WHEN length(s) > 4 THEN upper(s) ELSE lower(s) END END AS v FROM t1
case_where: SELECT id FROM t1 WHERE CASE WHEN a > 20 THEN b > 10 ELSE c > 0 END
case_e: SELECT id, CASE WHEN price > 200 THEN amount * 2 WHEN price > 100 THEN amount ELSE 0 END AS score FROM e
coalesce: SELECT id, COALESCE(a, b, -1) AS x, COALESCE(s, 'none') AS y, COALESCE(c, d, 0) AS z FROM t1
nullif: SELECT id, NULLIF(a, b) AS x, NULLIF(s, 'apple') AS y, NULLIF(a, 5) AS z FROM t1
coalesce_null: SELECT id, COALESCE(NULL, a) AS x, COALESCE(NULLIF(a, a), b) AS y, NULLIF(NULL, a) AS z FROM t1
coalesce_e: SELECT id, COALESCE(cat, 'none') || ':' || COALESCE(k, -1) AS label FROM e
cast_num: SELECT id, CAST(a AS DOUBLE) AS x, CAST(b AS DECIMAL(10,2)) AS y, CAST(a AS TEXT) AS z, CAST(d AS DOUBLE) AS w FROM t1
# ours: like PostgreSQL, a cast of a fractional number to an integer rounds (half away from zero); SQLite truncates.
cast_round: SELECT id, CAST(c AS INT) AS x, CAST(d AS INT) AS y, CAST(c AS BIGINT) + 1 AS z FROM t1
sqlite: SELECT id, CAST(ROUND(c) AS INTEGER), CAST(ROUND(d) AS INTEGER), CAST(ROUND(c) AS INTEGER) + 1 FROM t1
# ours: a cast to DECIMAL(p,s) rounds to s digits; SQLite's REAL has no scale. d is an exact DECIMAL
# in ours, a REAL in SQLite (22.65 is 22.6499...): SQLite's side is nudged away from zero to round it
# half away from zero as a decimal does.
cast_decimal_scale: SELECT id, CAST(c AS DECIMAL(10,1)) AS x, CAST(d AS DECIMAL(8,1)) AS y FROM t1
sqlite: SELECT id, ROUND(c, 1), ROUND(d + CASE WHEN d < 0 THEN -1e-9 ELSE 1e-9 END, 1) FROM t1
cast_text_num: SELECT id, CAST('12' AS INT) + a AS x, CAST('2.5' AS DOUBLE) * a AS y, CAST(' 7 ' AS INT) AS z FROM t1
cast_ts: SELECT id, CAST(ts AS TEXT) AS x, CAST(ts AS DATE) AS y FROM t1
sqlite: SELECT id, ts, date(ts) FROM t1
# SQLite has no TIMESTAMP type (its CAST makes a number); its timestamps are text.
cast_ts_literal: SELECT id FROM e WHERE ts > CAST('2024-03-11 12:00:00' AS TIMESTAMP)
sqlite: SELECT id FROM e WHERE ts > '2024-03-11 12:00:00'
cast_concat: SELECT id, CAST(a AS TEXT) || '/' || CAST(b AS TEXT) AS x FROM t1
cast_bool: SELECT id, CAST(a > b AS INT) AS x, CAST(a > b AS INT) + CAST(b > 5 AS INT) AS y FROM t1
cast_text_to_number_where: SELECT id, s FROM t1 WHERE CAST(a AS TEXT) LIKE '1%'

# --- Text -------------------------------------------------------------------

str_case: SELECT id, lower(s) AS l, upper(s) AS u, length(s) AS n, char_length(s) AS m FROM t1
sqlite: SELECT id, lower(s), upper(s), length(s), length(s) FROM t1
str_substring: SELECT id, substring(s, 2, 3) AS a, substring(s, 2) AS b, substring(s FROM 1 FOR 2) AS c, substr(s, 0, 2) AS d, substring(s FROM 3) AS e FROM t1
sqlite: SELECT id, substr(s, 2, 3), substr(s, 2), substr(s, 1, 2), substr(s, 0, 2), substr(s, 3) FROM t1
str_substring_cols: SELECT id, substring(s, k, 2) AS x FROM (SELECT t1.id, t1.s, t2.k FROM t1 JOIN t2 ON t1.b = t2.x) q
sqlite: SELECT id, substr(s, k, 2) FROM (SELECT t1.id, t1.s, t2.k FROM t1 JOIN t2 ON t1.b = t2.x) q
str_trim: SELECT id, trim(s) AS t, ltrim(s) AS l, rtrim(s) AS r, trim(BOTH 'a' FROM s) AS ta, trim(LEADING ' ' FROM s) AS tl, trim(TRAILING 'e' FROM s) AS tt FROM t1
sqlite: SELECT id, trim(s), ltrim(s), rtrim(s), trim(s, 'a'), ltrim(s, ' '), rtrim(s, 'e') FROM t1
str_trim_chars: SELECT id, trim(s, 'ap') AS x, ltrim(s, 'aA') AS y, rtrim(s, 'ey') AS z, btrim(s, 'e') AS w FROM t1
sqlite: SELECT id, trim(s, 'ap'), ltrim(s, 'aA'), rtrim(s, 'ey'), trim(s, 'e') FROM t1
str_replace: SELECT id, replace(s, 'a', 'A') AS x, replace(s, 'an', '') AS y, replace(s, 'p', 'pp') AS z FROM t1
str_replace_empty: SELECT id, replace(s, '', 'x') AS x FROM t1
str_concat: SELECT id, s || '-' || a AS x, concat(s, '-', a) AS y, concat(s, NULL, b) AS z, s || s AS w FROM t1
str_concat_e: SELECT id, cat || '#' || id AS tag, concat(cat, amount) AS x FROM e
str_position: SELECT id, position('a' IN s) AS p, strpos(s, 'an') AS q, position('' IN s) AS r FROM t1
sqlite: SELECT id, instr(s, 'a'), instr(s, 'an'), instr(s, '') FROM t1
str_length_expr: SELECT id, length(s || s) AS n, length(trim(s)) AS m, length('') AS z FROM t1
str_like: SELECT id, s LIKE 'a%' AS a, s LIKE '%an%' AS b, s LIKE '_pple' AS c, s NOT LIKE '%e' AS d, s LIKE '' AS e, s LIKE '%' AS f FROM t1
str_like_where: SELECT id, s FROM t1 WHERE s LIKE '%a%' AND s NOT LIKE 'b%'
# ours: '\' escapes the next character in a LIKE pattern; SQLite needs ESCAPE for that.
str_like_escape: SELECT id, s LIKE 'x\_y' AS a, s LIKE 'a\%b' AS b, s LIKE 'a%b' AS c, s LIKE '%\%%' AS d FROM t1
sqlite: SELECT id, s LIKE 'x\_y' ESCAPE '\', s LIKE 'a\%b' ESCAPE '\', s LIKE 'a%b', s LIKE '%\%%' ESCAPE '\' FROM t1
str_ilike: SELECT id, s ILIKE 'apple' AS a, s ILIKE 'b%' AS b, s NOT ILIKE '%A%' AS c FROM t1
sqlite: SELECT id, lower(s) LIKE 'apple', lower(s) LIKE 'b%', lower(s) NOT LIKE '%a%' FROM t1
str_like_column: SELECT t1.id, t2.y, t1.s LIKE t2.y AS m, t2.y LIKE '%' || t1.s || '%' AS n FROM t1 JOIN t2 ON t1.a = t2.x
str_upper_group: SELECT upper(s) AS u, COUNT(*) AS n FROM t1 GROUP BY upper(s)
str_e: SELECT id, upper(cat) AS c, length(cat) AS n, substring(cat, 1, 1) AS f FROM e WHERE cat LIKE '%a%'
sqlite: SELECT id, upper(cat), length(cat), substr(cat, 1, 1) FROM e WHERE cat LIKE '%a%'
str_u: SELECT k, lower(w) || '!' AS x FROM u WHERE w IS NOT NULL

# --- Numbers ------------------------------------------------------------------

num_abs: SELECT id, abs(a) AS x, abs(c) AS y, abs(d) AS z, abs(a - b) AS w FROM t1
# d is an exact DECIMAL in ours, a REAL in SQLite: nudged as in cast_decimal_scale.
num_round: SELECT id, round(c) AS x, round(c, 1) AS y, round(d, 1) AS z, round(d) AS w, round(a) AS v FROM t1
sqlite: SELECT id, round(c), round(c, 1), round(d + CASE WHEN d < 0 THEN -1e-9 ELSE 1e-9 END, 1), round(d), round(a) FROM t1
num_round_price: SELECT id, round(price, 1) AS p1, round(price) AS p0, round(price * 3, 2) AS p2 FROM e
# ours: round(x, -1) rounds to tens, as in PostgreSQL; SQLite ignores a negative precision.
num_round_negative: SELECT id, round(a, -1) AS x, round(d, -1) AS y FROM t1
sqlite: SELECT id, CAST(ROUND(a / 10.0) * 10 AS INTEGER), ROUND(d / 10.0) * 10 FROM t1
# SQLite (as built here) has no floor() and ceil().
num_floor_ceil: SELECT id, floor(c) AS f, ceil(c) AS c2, floor(d) AS fd, ceiling(d) AS cd FROM t1
sqlite: SELECT id,
    CASE WHEN c = CAST(c AS INTEGER) OR c >= 0 THEN CAST(c AS INTEGER) ELSE CAST(c AS INTEGER) - 1 END,
    CASE WHEN c = CAST(c AS INTEGER) OR c < 0 THEN CAST(c AS INTEGER) ELSE CAST(c AS INTEGER) + 1 END,
    CASE WHEN d = CAST(d AS INTEGER) OR d >= 0 THEN CAST(d AS INTEGER) ELSE CAST(d AS INTEGER) - 1 END,
    CASE WHEN d = CAST(d AS INTEGER) OR d < 0 THEN CAST(d AS INTEGER) ELSE CAST(d AS INTEGER) + 1 END
    FROM t1
# ours: greatest/least skip NULLs (as PostgreSQL); SQLite's max/min of several values are NULL if any is.
num_greatest_least: SELECT id, greatest(a, b) AS g, least(a, b, 10) AS l FROM t1
sqlite: SELECT id, max(COALESCE(a, b), COALESCE(b, a)), min(COALESCE(a, 10), COALESCE(b, 10), 10) FROM t1

# --- Timestamps ---------------------------------------------------------------

ts_extract: SELECT id, EXTRACT(YEAR FROM ts) AS y, EXTRACT(MONTH FROM ts) AS mo, EXTRACT(DAY FROM ts) AS d, EXTRACT(HOUR FROM ts) AS h, EXTRACT(MINUTE FROM ts) AS mi, EXTRACT(SECOND FROM ts) AS s FROM t1
sqlite: SELECT id, CAST(strftime('%Y', ts) AS INTEGER), CAST(strftime('%m', ts) AS INTEGER), CAST(strftime('%d', ts) AS INTEGER),
    CAST(strftime('%H', ts) AS INTEGER), CAST(strftime('%M', ts) AS INTEGER), CAST(strftime('%S', ts) AS REAL) FROM t1
ts_extract_more: SELECT id, EXTRACT(DOW FROM ts) AS dow, EXTRACT(DOY FROM ts) AS doy, EXTRACT(EPOCH FROM ts) AS ep, EXTRACT(QUARTER FROM ts) AS q FROM e
sqlite: SELECT id, CAST(strftime('%w', ts) AS INTEGER), CAST(strftime('%j', ts) AS INTEGER), ep,
    (CAST(strftime('%m', ts) AS INTEGER) + 2) / 3 FROM e_s
ts_trunc: SELECT id, date_trunc('hour', ts) AS h, date_trunc('day', ts) AS d, date_trunc('minute', ts) AS mi, date_trunc('month', ts) AS mo, date_trunc('year', ts) AS y FROM t1
sqlite: SELECT id, strftime('%Y-%m-%d %H:00:00', ts), strftime('%Y-%m-%d 00:00:00', ts), strftime('%Y-%m-%d %H:%M:00', ts),
    strftime('%Y-%m-01 00:00:00', ts), strftime('%Y-01-01 00:00:00', ts) FROM t1
ts_trunc_week: SELECT id, date_trunc('week', ts) AS w FROM e
sqlite: SELECT id, date(ts, '-6 days', 'weekday 1') || ' 00:00:00' FROM e
ts_interval: SELECT id, ts + INTERVAL '1' HOUR AS a, ts - INTERVAL '30 minutes' AS b, ts + INTERVAL '1 day 2 hours' AS c, INTERVAL '90' SECOND + ts AS d FROM t1
sqlite: SELECT id, datetime(ts, '+1 hour'), datetime(ts, '-30 minutes'), datetime(ts, '+1 day', '+2 hours'), datetime(ts, '+90 seconds') FROM t1
ts_diff: SELECT e.id, EXTRACT(EPOCH FROM e.ts - t1.ts) AS secs FROM e JOIN t1 ON e.id = t1.id
sqlite: SELECT e_s.id, e_s.ep - t1_s.ts_s FROM e_s JOIN t1_s ON e_s.id = t1_s.id
ts_group_hour: SELECT date_trunc('hour', ts) AS h, COUNT(*) AS n, SUM(amount) AS total FROM e GROUP BY date_trunc('hour', ts)
sqlite: SELECT strftime('%Y-%m-%d %H:00:00', ts) AS h, COUNT(*), SUM(amount) FROM e GROUP BY h
ts_where_range: SELECT id, ts FROM e WHERE ts >= '2024-03-11 00:00:00' AND ts < '2024-03-12 00:00:00'
ts_minmax: SELECT cat, MIN(ts) AS first, MAX(ts) AS last FROM e GROUP BY cat
ts_date_group: SELECT CAST(ts AS DATE) AS day, COUNT(*) AS n FROM e GROUP BY CAST(ts AS DATE)
sqlite: SELECT date(ts) AS day, COUNT(*) FROM e GROUP BY day
ts_extract_group: SELECT EXTRACT(HOUR FROM ts) AS h, COUNT(*) AS n, AVG(amount) AS a FROM e GROUP BY EXTRACT(HOUR FROM ts)
sqlite: SELECT CAST(strftime('%H', ts) AS INTEGER) AS h, COUNT(*), AVG(amount) FROM e GROUP BY h
ts_compare_cols: SELECT e.id, t1.id AS tid FROM e JOIN t1 ON e.k = t1.b WHERE e.ts > t1.ts + INTERVAL '1' DAY
sqlite: SELECT e.id, t1.id FROM e JOIN t1 ON e.k = t1.b WHERE e.ts > datetime(t1.ts, '+1 day')

ts_fraction: SELECT id, ts, EXTRACT(SECOND FROM ts) AS s, EXTRACT(MILLISECOND FROM ts) AS ms, date_trunc('second', ts) AS t FROM e
sqlite: SELECT id, ts, CAST(strftime('%f', ts) AS REAL), CAST(strftime('%f', ts) AS REAL) * 1000, strftime('%Y-%m-%d %H:%M:%S', ts) FROM e
ts_in_list: SELECT id FROM e WHERE ts IN ('2024-03-10 05:00:00', '2024-03-11 00:00:00', '2024-03-12 10:00:00') OR ts = '2024-03-10 12:00:00'

# --- Dates -------------------------------------------------------------------

date_arith: SELECT k, x, day, day + 1 AS next, day - 7 AS week_before, day - DATE '2024-03-01' AS since FROM t2
sqlite: SELECT k, x, day, date(day, '+1 day'), date(day, '-7 days'), CAST(julianday(day) - julianday('2024-03-01') AS INTEGER) FROM t2
date_extract: SELECT day, EXTRACT(DOW FROM day) AS dow, EXTRACT(DAY FROM day) AS d, EXTRACT(MONTH FROM day) AS m FROM t2
sqlite: SELECT day, CAST(strftime('%w', day) AS INTEGER), CAST(strftime('%d', day) AS INTEGER), CAST(strftime('%m', day) AS INTEGER) FROM t2
date_cast: SELECT day, CAST(day AS TIMESTAMP) AS t, CAST(day AS TEXT) AS s, day + INTERVAL '36' HOUR AS later FROM t2
sqlite: SELECT day, day || ' 00:00:00', day, datetime(day, '+36 hours') FROM t2
date_compare: SELECT k, day FROM t2 WHERE day >= '2024-03-01' AND day < DATE '2024-03-10'
sqlite: SELECT k, day FROM t2 WHERE day >= '2024-03-01' AND day < '2024-03-10'
date_vs_timestamp: SELECT t2.day, e.id FROM t2 JOIN e ON t2.k = e.k WHERE e.ts < t2.day AND t2.x > 60
sqlite: SELECT t2.day, e.id FROM t2 JOIN e ON t2.k = e.k WHERE e.ts < t2.day || ' 00:00:00' AND t2.x > 60
date_group: SELECT day, COUNT(*) AS n, MIN(x) AS lo, COUNT(DISTINCT k) AS dk FROM t2 GROUP BY day
date_minmax: SELECT k, MIN(day) AS first, MAX(day) AS last FROM t2 GROUP BY k
date_trunc_date: SELECT day, date_trunc('month', day) AS m, date_trunc('week', day) AS w FROM t2
sqlite: SELECT day, strftime('%Y-%m-01 00:00:00', day), date(day, '-6 days', 'weekday 1') || ' 00:00:00' FROM t2
date_join_ts: SELECT t2.day, COUNT(*) AS n FROM t2 JOIN e ON CAST(e.ts AS DATE) = t2.day GROUP BY t2.day
sqlite: SELECT t2.day, COUNT(*) FROM t2 JOIN e ON date(e.ts) = t2.day GROUP BY t2.day

# --- Booleans ------------------------------------------------------------------

bool_cols: SELECT id, ok, NOT ok AS nok, ok IS NULL AS unknown, ok AND amount > 10 AS both, ok OR price > 100 AS either FROM e
bool_where: SELECT id FROM e WHERE ok
bool_where_not: SELECT id FROM e WHERE NOT ok AND k IS NOT NULL
bool_group: SELECT ok, COUNT(*) AS n, SUM(amount) AS s, MIN(ok) AS lo, MAX(ok) AS hi FROM e GROUP BY ok
bool_cast: SELECT id, CAST(ok AS INT) AS i, CASE WHEN ok THEN 'yes' WHEN NOT ok THEN 'no' ELSE '?' END AS t FROM e
bool_compare: SELECT id, ok = (amount > 25) AS same, ok <> TRUE AS not_true, ok IS NOT DISTINCT FROM FALSE AS is_false FROM e
bool_count_distinct: SELECT k, COUNT(DISTINCT ok) AS d, COUNT(ok) AS n FROM e GROUP BY k
bool_join: SELECT a.id, b.id AS bid FROM e a JOIN e b ON a.ok = b.ok AND a.k = b.k WHERE a.id + 50 < b.id AND a.amount > 45

# --- WHERE on every input ----------------------------------------------------

where_e: SELECT id, k, amount FROM e WHERE amount > 25 AND k IS NOT NULL
where_e_price: SELECT id, price FROM e WHERE price * 2 > 100 OR cat = 'fig'
where_u: SELECT k, v FROM u WHERE v < 0 OR w IS NULL
where_t2: SELECT k, x, y FROM t2 WHERE x BETWEEN 0 AND 30 AND y <> 'apple'
where_t3: SELECT k, name FROM t3 WHERE w > 10 OR name IS NULL
where_const_false: SELECT id FROM t1 WHERE 1 = 0
where_const_true: SELECT id FROM t1 WHERE 1 = 1 AND TRUE
where_null_literal: SELECT id FROM t1 WHERE NULL
where_decimal: SELECT id, d FROM t1 WHERE d > 10.5 AND d < 40
where_double_eq: SELECT id, c FROM t1 WHERE c = 2.5 OR c = -1 OR c = 0.125

# --- Global aggregates -----------------------------------------------------------

agg_global_t1: SELECT COUNT(*) AS n, COUNT(a) AS na, COUNT(DISTINCT a) AS da, SUM(a) AS s, MIN(a) AS lo, MAX(a) AS hi, AVG(a) AS av FROM t1
agg_global_double: SELECT COUNT(c) AS n, SUM(c) AS s, MIN(c) AS lo, MAX(c) AS hi, AVG(c) AS av, COUNT(DISTINCT c) AS dc FROM t1
# ours: AVG of a DECIMAL is a DECIMAL with 6 fractional digits.
# SQLite averages DECIMAL(10,2) in floats, which can land either side of a half millionth:
# the exact average in millionths, rounded half away from zero as ours, from integer cents.
agg_global_decimal: SELECT SUM(d) AS s, MIN(d) AS lo, MAX(d) AS hi, AVG(d) AS av, COUNT(DISTINCT d) AS dd FROM t1
sqlite: SELECT SUM(d), MIN(d), MAX(d), CAST((20000 * SUM(CAST(ROUND(d * 100) AS INTEGER)) + (CASE WHEN SUM(d) < 0 THEN -1 ELSE 1 END) * COUNT(d)) / (2 * COUNT(d)) AS REAL) / 1000000.0, COUNT(DISTINCT d) FROM t1
agg_global_text: SELECT MIN(s) AS lo, MAX(s) AS hi, COUNT(s) AS n, COUNT(DISTINCT s) AS dn FROM t1
agg_global_empty: SELECT COUNT(*) AS n, COUNT(a) AS na, SUM(a) AS s, MIN(b) AS lo, MAX(b) AS hi, AVG(a) AS av, COUNT(DISTINCT a) AS da FROM t0
agg_global_filtered_empty: SELECT COUNT(*) AS n, SUM(a) AS s, MAX(s) AS m FROM t1 WHERE a > 1000
agg_global_emptied: SELECT COUNT(*) AS n, COUNT(DISTINCT a) AS d, SUM(a) AS s, MIN(b) AS m FROM t4
agg_global_e: SELECT COUNT(*) AS n, SUM(amount) AS s, AVG(price) AS p, COUNT(DISTINCT cat) AS c, MIN(ts) AS t, MAX(ts) AS t2 FROM e
agg_global_u: SELECT COUNT(*) AS n, SUM(v) AS s, MAX(w) AS w, MIN(v) AS lo FROM u
agg_global_expr: SELECT SUM(a * b) AS x, SUM(a) - SUM(b) AS y, MAX(a) - MIN(a) AS r, COUNT(*) * 2 AS n2 FROM t1
agg_global_case: SELECT SUM(CASE WHEN s = 'apple' THEN 1 ELSE 0 END) AS apples, COUNT(CASE WHEN a > 50 THEN 1 END) AS big FROM t1
agg_global_only_count: SELECT COUNT(*) AS n FROM e
agg_global_empty_join: SELECT COUNT(*) AS n, SUM(t2.x) AS s FROM t2 JOIN t0 ON t2.k = t0.a
agg_global_having: SELECT COUNT(*) AS n FROM t1 HAVING COUNT(*) > 5
agg_global_having_empty: SELECT COUNT(*) AS n FROM t4 HAVING COUNT(*) > 0
agg_global_of_literal: SELECT SUM(1) AS s, COUNT(2) AS c, MAX('x') AS m FROM t1
agg_global_avg_expr: SELECT AVG(amount * 2) AS a, AVG(price - amount) AS b, SUM(price) / COUNT(price) AS c FROM e

# --- GROUP BY ----------------------------------------------------------------------

agg_group_s: SELECT s, COUNT(*) AS n, SUM(a) AS total, MIN(c) AS lo, MAX(c) AS hi FROM t1 GROUP BY s
agg_group_avg: SELECT s, AVG(a) AS av, AVG(c) AS ac FROM t1 GROUP BY s
agg_group_expr: SELECT a % 5 AS r, COUNT(*) AS n, SUM(b) AS sb FROM t1 GROUP BY a % 5
agg_group_position: SELECT a % 3, COUNT(*) AS n FROM t1 GROUP BY 1
agg_group_alias: SELECT b / 10 AS bucket, COUNT(*) AS n, MAX(a) AS m FROM t1 GROUP BY bucket
agg_group_two: SELECT k, y, COUNT(*) AS n, SUM(x) AS sx FROM t2 GROUP BY k, y
agg_group_null_key: SELECT k, COUNT(*) AS n, COUNT(x) AS nx, COUNT(DISTINCT y) AS dy FROM t2 GROUP BY k
agg_group_e_cat: SELECT cat, COUNT(*) AS n, SUM(amount) AS total, AVG(amount) AS av, MAX(price) AS mp FROM e GROUP BY cat
agg_group_e_k: SELECT k, COUNT(DISTINCT cat) AS cats, SUM(price) AS sp, MIN(amount) AS lo FROM e GROUP BY k
agg_group_u: SELECT w, COUNT(*) AS n, SUM(v) AS sv, MIN(k) AS mk FROM u GROUP BY w
agg_group_hidden_key: SELECT COUNT(*) AS n, SUM(x) AS sx FROM t2 GROUP BY k
agg_group_expr_of_key: SELECT k + 1 AS k1, k * k AS k2, COUNT(*) AS n FROM t2 GROUP BY k
agg_group_bool: SELECT a > 50 AS big, COUNT(*) AS n FROM t1 GROUP BY a > 50
agg_group_text_fn: SELECT lower(s) AS l, COUNT(*) AS n, COUNT(DISTINCT s) AS variants FROM t1 GROUP BY lower(s)
agg_group_decimal: SELECT s, SUM(d) AS sd, AVG(d) AS ad, MAX(d) AS md FROM t1 GROUP BY s
sqlite: SELECT s, SUM(d), CAST((20000 * SUM(CAST(ROUND(d * 100) AS INTEGER)) + (CASE WHEN SUM(d) < 0 THEN -1 ELSE 1 END) * COUNT(d)) / (2 * COUNT(d)) AS REAL) / 1000000.0, MAX(d) FROM t1 GROUP BY s
# SQLite has no variance (nor sqrt here): the same formula over its exact integer sums (and its
# float sums of doubles); a standard deviation is compared squared.
var_grouped: SELECT s, VAR_SAMP(a) AS vs, VAR_POP(a) AS vp, VARIANCE(b) AS vb, STDDEV(c) * STDDEV(c) AS sc2, STDDEV_POP(d) * STDDEV_POP(d) AS sd2 FROM t1 GROUP BY s
sqlite: SELECT s, MAX((1.0 * SUM(a * a) - 1.0 * SUM(a) * SUM(a) / COUNT(a)) / (COUNT(a) - 1.0), 0), MAX((1.0 * SUM(a * a) - 1.0 * SUM(a) * SUM(a) / COUNT(a)) / COUNT(a), 0), MAX((1.0 * SUM(b * b) - 1.0 * SUM(b) * SUM(b) / COUNT(b)) / (COUNT(b) - 1.0), 0), MAX((SUM(c * c) - SUM(c) * SUM(c) / COUNT(c)) / (COUNT(c) - 1.0), 0), MAX((SUM(d * d) - SUM(d) * SUM(d) / COUNT(d)) / COUNT(d), 0) FROM t1 GROUP BY s
var_global_filter: SELECT VAR_SAMP(x) AS v, power(STDDEV_SAMP(x) FILTER (WHERE k > 2), 2) AS sf2 FROM t2
sqlite: SELECT MAX((1.0 * SUM(x * x) - 1.0 * SUM(x) * SUM(x) / COUNT(x)) / (COUNT(x) - 1.0), 0), MAX((1.0 * SUM(x * x) FILTER (WHERE k > 2) - 1.0 * SUM(x) FILTER (WHERE k > 2) * SUM(x) FILTER (WHERE k > 2) / COUNT(x) FILTER (WHERE k > 2)) / (COUNT(x) FILTER (WHERE k > 2) - 1.0), 0) FROM t2
agg_group_multi_distinct: SELECT k, COUNT(DISTINCT x) AS dx, COUNT(DISTINCT y) AS dy, COUNT(DISTINCT c) AS dc FROM t2 GROUP BY k
agg_group_sum_double: SELECT k, SUM(c) AS sc, AVG(c) AS ac, MIN(c) AS lo FROM t2 GROUP BY k
agg_group_agg_expr: SELECT k, SUM(x) / COUNT(*) AS mean_int, MAX(x) - MIN(x) AS spread, CAST(SUM(x) AS DOUBLE) / COUNT(x) AS mean FROM t2 GROUP BY k
sqlite: SELECT k, SUM(x) / COUNT(*), MAX(x) - MIN(x), CAST(SUM(x) AS REAL) / COUNT(x) FROM t2 GROUP BY k
agg_group_coalesce: SELECT COALESCE(y, '?') AS y, COALESCE(SUM(x), 0) AS sx FROM t2 GROUP BY COALESCE(y, '?')
agg_group_case: SELECT CASE WHEN amount < 10 THEN 'small' WHEN amount < 30 THEN 'medium' ELSE 'large' END AS size, COUNT(*) AS n, SUM(price) AS p FROM e GROUP BY 1
agg_count_expr: SELECT cat, COUNT(price) AS np, COUNT(ts) AS nt, COUNT(1) AS n1, COUNT(*) AS n FROM e GROUP BY cat
agg_sum_null_only: SELECT k, SUM(CASE WHEN x > 1000 THEN x END) AS none, MAX(NULLIF(x, x)) AS m, COUNT(NULLIF(x, x)) AS c FROM t2 GROUP BY k
agg_minmax_retract: SELECT k, MIN(x) AS lo, MAX(x) AS hi, MIN(y) AS ly, MAX(y) AS hy FROM t2 GROUP BY k
agg_group_ts_minmax: SELECT s, MIN(ts) AS first, MAX(ts) AS last FROM t1 GROUP BY s
# ours: AVG of a DECIMAL is a DECIMAL with 6 fractional digits.
agg_avg_mixed: SELECT k, AVG(x) AS ax, AVG(x + 0.5) AS ay FROM t2 GROUP BY k
sqlite: SELECT k, AVG(x), ROUND(AVG(x + 0.5), 6) FROM t2 GROUP BY k
agg_group_u_k_parity: SELECT k % 2 AS parity, COUNT(*) AS n, SUM(v) AS s, COUNT(DISTINCT w) AS dw FROM u GROUP BY k % 2
agg_group_t3: SELECT name, COUNT(*) AS n, SUM(w) AS sw FROM t3 GROUP BY name
agg_group_where: SELECT k, SUM(amount) AS s FROM e WHERE price > 50 GROUP BY k
agg_group_two_e: SELECT k, cat, COUNT(*) AS n, MAX(amount) AS m FROM e GROUP BY k, cat
agg_group_repeat_key: SELECT k, k AS k2, COUNT(*) AS n FROM t2 GROUP BY k, k
agg_group_agg_in_case: SELECT k, CASE WHEN COUNT(*) > 5 THEN 'many' ELSE 'few' END AS size, COALESCE(MAX(y), '-') AS my FROM t2 GROUP BY k
agg_group_id_mod: SELECT id % 10 AS r, COUNT(*) AS n, SUM(amount) AS s, MIN(price) AS p FROM e GROUP BY id % 10

# --- HAVING ----------------------------------------------------------------------

having_count: SELECT k, COUNT(*) AS n FROM t2 GROUP BY k HAVING COUNT(*) > 5
having_hidden: SELECT k, SUM(x) AS sx FROM t2 GROUP BY k HAVING MIN(x) < 10 AND MAX(x) > 50
having_group_col: SELECT cat, COUNT(*) AS n FROM e GROUP BY cat HAVING cat <> 'apple' OR cat IS NULL
having_avg: SELECT s, AVG(a) AS av FROM t1 GROUP BY s HAVING AVG(a) > 40
having_distinct: SELECT k FROM e GROUP BY k HAVING COUNT(DISTINCT cat) >= 3
having_sum_null: SELECT k, SUM(x) AS s FROM t2 GROUP BY k HAVING SUM(x) IS NULL OR SUM(x) < 100
having_alias_expr: SELECT cat, SUM(amount) AS total FROM e GROUP BY cat HAVING SUM(amount) > 2 * COUNT(*)
having_where: SELECT s, COUNT(*) AS n FROM t1 WHERE s LIKE '%a%' GROUP BY s HAVING SUM(a) IS NOT NULL

# --- Aggregates of subqueries -------------------------------------------------

agg_nested_subquery: SELECT MAX(n) AS most, MIN(n) AS least, SUM(n) AS total FROM (SELECT k, COUNT(*) AS n FROM e GROUP BY k) q
agg_twice: SELECT n, COUNT(*) AS groups FROM (SELECT k, COUNT(*) AS n FROM t2 GROUP BY k) q GROUP BY n
agg_of_distinct: SELECT COUNT(*) AS n, SUM(k) AS s FROM (SELECT DISTINCT k FROM t2) q
agg_of_join_count: SELECT t3.name, COUNT(e.id) AS n FROM t3 LEFT JOIN e ON t3.k = e.k GROUP BY t3.name

# --- Joins -------------------------------------------------------------------------

join_inner: SELECT t2.k, t2.x, t3.name FROM t2 JOIN t3 ON t2.k = t3.k
using_star: SELECT * FROM t2 JOIN t3 USING (k)
using_left: SELECT k, x, name FROM t2 LEFT JOIN t3 USING (k)
using_qualified: SELECT k, t2.k AS k2, t3.k AS k3, t3.w FROM t2 LEFT JOIN t3 USING (k)
using_right: SELECT * FROM t2 RIGHT JOIN t3 USING (k)
using_full: SELECT k, x, name FROM t2 FULL JOIN t3 USING (k)
using_chain: SELECT k, x, name, v FROM t2 JOIN t3 USING (k) JOIN u USING (k)
using_grouped: SELECT k, COUNT(*) AS n, MAX(name) AS m FROM t2 JOIN t3 USING (k) GROUP BY k
using_table_star: SELECT t3.*, x FROM t2 JOIN t3 USING (k)
natural_star: SELECT * FROM t2 NATURAL JOIN t3
natural_left: SELECT k, name, y FROM t3 NATURAL LEFT JOIN t2
natural_none_common: SELECT * FROM t3 NATURAL JOIN (SELECT a, b FROM t4) q
join_inner_star: SELECT * FROM t2 INNER JOIN (SELECT k AS k3, name, w FROM t3) t ON t.k3 = t2.k
join_left: SELECT t2.k, t2.x, t3.name, t3.w FROM t2 LEFT JOIN t3 ON t2.k = t3.k
join_left_outer: SELECT t3.k, t3.name, t2.x FROM t3 LEFT OUTER JOIN t2 ON t3.k = t2.k
join_right: SELECT t2.x, t3.k, t3.name FROM t2 RIGHT JOIN t3 ON t2.k = t3.k
join_right_outer: SELECT t3.name, u.k, u.v FROM t3 RIGHT OUTER JOIN u ON t3.k = u.k
join_full: SELECT t2.k AS k2, t2.x, t3.k AS k3, t3.name FROM t2 FULL OUTER JOIN t3 ON t2.k = t3.k
join_full_u: SELECT u.k AS uk, u.v, t3.k AS tk, t3.w FROM u FULL JOIN t3 ON u.k = t3.k
join_full_e: SELECT e.id, u.k, u.w FROM e FULL JOIN u ON e.k = u.k
join_e_u: SELECT e.id, e.amount, u.v FROM e JOIN u ON e.k = u.k
join_e_u_left: SELECT e.id, u.w FROM e LEFT JOIN u ON e.k = u.k
join_u_e_right: SELECT u.k, e.id FROM u RIGHT JOIN e ON u.k = e.k
join_three: SELECT e.id, t3.name, u.v FROM e JOIN t3 ON e.k = t3.k JOIN u ON u.k = e.k
join_three_left: SELECT t3.k, t2.x, u.v FROM t3 LEFT JOIN t2 ON t3.k = t2.k LEFT JOIN u ON t3.k = u.k
join_three_mixed: SELECT t3.k, e.id, u.w FROM t3 JOIN e ON t3.k = e.k LEFT JOIN u ON e.k = u.k WHERE e.amount > 20
join_full_left_chain: SELECT t2.x, t3.name, u.v FROM t2 FULL JOIN t3 ON t2.k = t3.k LEFT JOIN u ON t3.k = u.k
join_four: SELECT e.id, t2.x, t3.name, u.v FROM e JOIN t2 ON e.k = t2.k JOIN t3 ON t2.k = t3.k JOIN u ON t3.k = u.k WHERE e.amount > 40 AND t2.x > 50
join_where_eq: SELECT t2.x, t3.w FROM t2, t3 WHERE t2.k = t3.k AND t2.x > t3.w
join_residual: SELECT t2.x, t3.w FROM t2 JOIN t3 ON t2.k = t3.k AND t2.x > t3.w
join_left_right_filter: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t3.k = t2.k AND t2.x > 20
join_left_across: SELECT t3.k, t3.w, t2.x FROM t3 LEFT JOIN t2 ON t3.k = t2.k AND t2.x > t3.w
join_left_preserved_filter: SELECT t3.k, t3.name, t2.x FROM t3 LEFT JOIN t2 ON t3.k = t2.k AND t3.w > 50
join_left_theta_only: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t2.x BETWEEN t3.w AND t3.w + 5
join_left_or: SELECT t1.id, t2.k, t2.x FROM t1 LEFT JOIN t2 ON t1.a = t2.x OR t1.b = t2.k
join_right_across: SELECT t2.k, t2.x, t3.name FROM t3 RIGHT JOIN t2 ON t3.k = t2.k AND t2.x < t3.w
join_full_across: SELECT t3.k AS k3, t3.w, t2.k AS k2, t2.x FROM t3 FULL JOIN t2 ON t3.k = t2.k AND t2.x >= t3.w
join_left_across_dups: SELECT t2.k, t2.x, u.v FROM t2 LEFT JOIN u ON t2.k = u.k AND u.v > t2.x
join_left_across_grouped: SELECT t3.k, COUNT(t2.x) AS n, SUM(t2.x) AS s FROM t3 LEFT JOIN t2 ON t3.k = t2.k AND t2.x > t3.w GROUP BY t3.k
join_left_where_right: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t3.k = t2.k WHERE t2.x > 20 OR t2.x IS NULL
join_self: SELECT p.id AS pid, q.id AS qid FROM t1 p JOIN t1 q ON p.a = q.b WHERE p.id < q.id
join_expr_key: SELECT t2.x, t3.name FROM t2 JOIN t3 ON t2.k + 1 = t3.k
join_mixed_types: SELECT t1.id, t2.x FROM t1 JOIN t2 ON t1.a = t2.c
join_decimal_key: SELECT t1.id, p.id AS pid FROM t1 JOIN t1 p ON t1.d = p.c
join_text_key: SELECT t1.id, e.id AS eid FROM t1 JOIN e ON t1.s = e.cat WHERE t1.a > 40 AND e.amount > 40
join_two_keys: SELECT t2.x, e.id FROM t2 JOIN e ON t2.k = e.k AND t2.x = e.amount
join_group: SELECT t3.name, COUNT(*) AS n, SUM(e.amount) AS total FROM e JOIN t3 ON e.k = t3.k GROUP BY t3.name
join_left_group: SELECT t3.k, COUNT(t2.x) AS n, SUM(t2.x) AS sx FROM t3 LEFT JOIN t2 ON t3.k = t2.k GROUP BY t3.k
join_full_group: SELECT COALESCE(t2.k, t3.k) AS k, COUNT(*) AS n FROM t2 FULL JOIN t3 ON t2.k = t3.k GROUP BY COALESCE(t2.k, t3.k)
join_null_keys: SELECT t2.k, t2.x, e.id FROM t2 LEFT JOIN e ON t2.k = e.k WHERE t2.k IS NULL
join_null_keys_full: SELECT t2.x, u.v FROM t2 FULL JOIN u ON t2.k = u.v
join_cross: SELECT t3.k, t4.a FROM t3 CROSS JOIN t4
join_cross_comma: SELECT t3.k AS k1, x.k AS k2 FROM t3, t3 AS x WHERE t3.w < x.w
join_cross_empty: SELECT t3.k, t0.a FROM t3 CROSS JOIN t0
join_using: SELECT t2.x, t3.name FROM t2 JOIN t3 USING (k)
join_subquery: SELECT q.k, q.n, t3.name FROM (SELECT k, COUNT(*) AS n FROM e GROUP BY k) q JOIN t3 ON q.k = t3.k
join_subqueries_full: SELECT a.k AS ka, a.n, b.k AS kb, b.m FROM (SELECT k, COUNT(*) AS n FROM t2 GROUP BY k) a FULL JOIN (SELECT k, SUM(amount) AS m FROM e GROUP BY k) b ON a.k = b.k
join_nested_parens: SELECT t2.x, t3.name, u.v FROM t2 JOIN (t3 JOIN u ON t3.k = u.k) ON t2.k = t3.k
join_anti: SELECT t3.k FROM t3 LEFT JOIN t2 ON t3.k = t2.k WHERE t2.k IS NULL
join_alias_star: SELECT a.*, b.name FROM t2 a JOIN t3 b ON a.k = b.k
join_right_three: SELECT t2.x, u.k, u.v FROM t2 JOIN t3 ON t2.k = t3.k RIGHT JOIN u ON t3.k = u.k
join_dup_rows: SELECT a.x AS x1, b.x AS x2 FROM t2 a JOIN t2 b ON a.k = b.k AND a.y = b.y
join_ts_key: SELECT e.id, t1.id AS tid FROM e JOIN t1 ON date_trunc('hour', e.ts) = date_trunc('hour', t1.ts)
sqlite: SELECT e.id, t1.id FROM e JOIN t1 ON strftime('%Y-%m-%d %H', e.ts) = strftime('%Y-%m-%d %H', t1.ts)
join_on_or: SELECT t2.x, t3.k FROM t2 JOIN t3 ON t2.k = t3.k OR t2.x = t3.w
join_left_agg_right: SELECT t3.k, q.n FROM t3 LEFT JOIN (SELECT k, COUNT(*) AS n FROM u GROUP BY k) q ON t3.k = q.k
join_full_where: SELECT t2.k AS a, t3.k AS b FROM t2 FULL JOIN t3 ON t2.k = t3.k WHERE t2.x IS NULL OR t3.name IS NULL
join_comma_three: SELECT t2.x, t3.name, u.v FROM t2, t3, u WHERE t2.k = t3.k AND t3.k = u.k AND u.v > -20
join_comma_mixed: SELECT e.id, t3.name FROM t3, e LEFT JOIN u ON e.k = u.k WHERE e.k = t3.k AND u.k IS NULL
join_u_self: SELECT a.k, b.k AS k2 FROM u a JOIN u b ON a.v = b.v AND a.k < b.k
join_right_where: SELECT t2.x, t3.k FROM t2 RIGHT JOIN t3 ON t2.k = t3.k WHERE t3.w > 10 OR t2.x IS NULL
join_inner_on_filters: SELECT t2.x, t3.name FROM t2 JOIN t3 ON t2.k = t3.k AND t3.w > 10 AND t2.x < 50 AND 1 = 1
join_full_coalesce_key: SELECT COALESCE(a.k, b.k) AS k, a.n, b.n AS m FROM (SELECT k, COUNT(*) AS n FROM t2 GROUP BY k) a
    FULL JOIN (SELECT k, COUNT(*) AS n FROM u GROUP BY k) b ON a.k = b.k
union_all_same: SELECT k FROM u UNION ALL SELECT k FROM u UNION ALL SELECT v FROM u
join_e_self_window: SELECT a.id, b.id AS bid FROM e a JOIN e b ON a.k = b.k AND a.cat = b.cat WHERE a.id < b.id AND a.amount = b.amount

# --- Window functions (ORDER BY keys unique where the answer depends on ties' order) ---

win_rank: SELECT id, a, RANK() OVER (ORDER BY a) AS r, DENSE_RANK() OVER (ORDER BY a) AS dr FROM t1
win_rank_partition: SELECT id, s, RANK() OVER (PARTITION BY s ORDER BY b DESC) AS r, PERCENT_RANK() OVER (PARTITION BY s ORDER BY b DESC) AS pr, CUME_DIST() OVER (PARTITION BY s ORDER BY b DESC) AS cd FROM t1
win_lag_lead: SELECT id, a, LAG(a) OVER (ORDER BY id) AS prev, LEAD(a, 2, -1) OVER (ORDER BY id) AS next2, LAG(s, 1, 'none') OVER (PARTITION BY a > 50 ORDER BY id) AS ps FROM t1
win_running: SELECT id, s, SUM(a) OVER (PARTITION BY s ORDER BY id) AS running, COUNT(*) OVER (PARTITION BY s ORDER BY id) AS n, AVG(b) OVER (PARTITION BY s ORDER BY id) AS av FROM t1
win_range_peers: SELECT id, a, SUM(b) OVER (ORDER BY a) AS sb, COUNT(b) OVER (ORDER BY a) AS nb, MAX(c) OVER (ORDER BY a) AS mc FROM t1
win_rows_frames: SELECT id, AVG(c) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS avg3, MIN(a) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS mn, MAX(a) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS mx, SUM(b) OVER (ORDER BY id ROWS BETWEEN 3 FOLLOWING AND 5 FOLLOWING) AS ahead, COUNT(*) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING) AS before2 FROM t1
win_whole_partition: SELECT id, s, SUM(a) OVER (PARTITION BY s) AS total, CAST(a AS DOUBLE) / SUM(a) OVER (PARTITION BY s) AS share, COUNT(*) OVER () AS everyone FROM t1
win_values: SELECT id, FIRST_VALUE(s) OVER (ORDER BY id) AS f, LAST_VALUE(s) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS l, NTH_VALUE(a, 2) OVER (ORDER BY id) AS second FROM t1
win_ntile: SELECT id, NTILE(4) OVER (ORDER BY id) AS q, NTILE(3) OVER (PARTITION BY s ORDER BY id) AS q3 FROM t1
win_row_number_all: SELECT id, ROW_NUMBER() OVER (PARTITION BY s ORDER BY id) AS rn FROM t1
win_in_expressions: SELECT id, a - LAG(a) OVER (ORDER BY id) AS delta, 2 * RANK() OVER (ORDER BY b) AS r2, RANK() OVER (ORDER BY b) AS r FROM t1
win_duplicates: SELECT k, x, RANK() OVER (PARTITION BY k ORDER BY x) AS r, SUM(x) OVER (PARTITION BY k) AS total, DENSE_RANK() OVER (ORDER BY k) AS dk FROM t2
win_append_only: SELECT id, cat, SUM(amount) OVER (PARTITION BY cat ORDER BY id) AS running FROM e
win_upsert: SELECT k, v, RANK() OVER (ORDER BY v DESC) AS r, LAG(v) OVER (ORDER BY k) AS prev FROM u
win_filtered_outer: SELECT id, r FROM (SELECT id, RANK() OVER (PARTITION BY s ORDER BY a) AS r FROM t1) q WHERE r <= 2

# --- Subqueries, UNION, DISTINCT -------------------------------------------------

sub_from: SELECT q.a, q.b FROM (SELECT a, b FROM t1 WHERE a > 10) q WHERE q.b < 40
# SQLite has no column list on a derived table's alias.
sub_from_alias_cols: SELECT x, y FROM (SELECT a, b FROM t1) AS q (x, y) WHERE x > y
sqlite: SELECT x, y FROM (SELECT a AS x, b AS y FROM t1) AS q WHERE x > y
sub_nested: SELECT m FROM (SELECT MAX(a) AS m FROM (SELECT a FROM t1 WHERE b > 5) q1) q2
sub_expr: SELECT k, total * 2 AS dbl FROM (SELECT k, SUM(x) AS total FROM t2 GROUP BY k) q WHERE total > 20
sub_no_alias_star: SELECT * FROM (SELECT k, v FROM u WHERE v > 0) z
union_all: SELECT k FROM t2 UNION ALL SELECT k FROM e
union_distinct: SELECT k FROM t2 UNION SELECT k FROM u
union_types: SELECT a AS v FROM t1 UNION ALL SELECT c FROM t2
union_three: SELECT s AS v FROM t1 UNION SELECT y FROM t2 UNION SELECT cat FROM e
union_all_agg: SELECT v, COUNT(*) AS n FROM (SELECT k AS v FROM t2 UNION ALL SELECT k FROM e) q GROUP BY v
union_distinct_rows: SELECT k, y FROM t2 UNION SELECT k, w FROM u
union_literal: SELECT 'a' AS tag, a AS v FROM t1 WHERE a > 90 UNION ALL SELECT 'b', x FROM t2 WHERE x > 90
union_all_dups: SELECT k, x FROM t2 UNION ALL SELECT k, x FROM t2
union_mixed: SELECT k FROM t2 UNION ALL SELECT k FROM t3 UNION SELECT k FROM u
intersect_keys: SELECT k FROM t2 INTERSECT SELECT k FROM u
intersect_rows_nulls: SELECT k, y FROM t2 INTERSECT SELECT k, w FROM u
intersect_self_distinct: SELECT k, x FROM t2 INTERSECT SELECT k, x FROM t2
except_keys: SELECT k FROM t2 EXCEPT SELECT k FROM t3
except_rows_nulls: SELECT a, s FROM t1 EXCEPT SELECT k, y FROM t2
except_append_only: SELECT k FROM e EXCEPT SELECT k FROM t3
except_chain: SELECT k FROM t2 EXCEPT SELECT k FROM t3 EXCEPT SELECT k FROM u
except_everything: SELECT k, x FROM t2 EXCEPT SELECT k, x FROM t2
# ours: INTERSECT binds tighter than UNION and EXCEPT (the standard, PostgreSQL); SQLite reads them left to right.
intersect_precedence: SELECT k FROM t2 UNION SELECT k FROM u INTERSECT SELECT k FROM t3
sqlite: SELECT k FROM t2 UNION SELECT * FROM (SELECT k FROM u INTERSECT SELECT k FROM t3)
intersect_then_except: SELECT k FROM t2 EXCEPT SELECT k FROM u INTERSECT SELECT k FROM t3
sqlite: SELECT k FROM t2 EXCEPT SELECT * FROM (SELECT k FROM u INTERSECT SELECT k FROM t3)
# SQLite has no INTERSECT ALL / EXCEPT ALL: the n-th copy of a row is (row, n) there, compared as a set.
intersect_all: SELECT k FROM t2 INTERSECT ALL SELECT k FROM e
sqlite: SELECT k FROM (SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM t2 INTERSECT SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM e)
intersect_all_rows: SELECT k, x FROM t2 INTERSECT ALL SELECT k, x FROM t2 WHERE x > 30
sqlite: SELECT k, x FROM (SELECT k, x, ROW_NUMBER() OVER (PARTITION BY k, x) FROM t2 INTERSECT SELECT k, x, ROW_NUMBER() OVER (PARTITION BY k, x) FROM t2 WHERE x > 30)
except_all: SELECT k, x FROM t2 EXCEPT ALL SELECT k, amount FROM e
sqlite: SELECT k, x FROM (SELECT k, x, ROW_NUMBER() OVER (PARTITION BY k, x) FROM t2 EXCEPT SELECT k, amount, ROW_NUMBER() OVER (PARTITION BY k, amount) FROM e)
except_all_self: SELECT k FROM t2 EXCEPT ALL SELECT k FROM t2 WHERE x > 50
sqlite: SELECT k FROM (SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM t2 EXCEPT SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM t2 WHERE x > 50)
except_all_counted: SELECT v, COUNT(*) AS n FROM (SELECT y AS v FROM t2 EXCEPT ALL SELECT w FROM u) q GROUP BY v
sqlite: SELECT v, COUNT(*) FROM (SELECT y AS v, ROW_NUMBER() OVER (PARTITION BY y) FROM t2 EXCEPT SELECT w, ROW_NUMBER() OVER (PARTITION BY w) FROM u) q GROUP BY v
except_in_subquery: SELECT id FROM t1 WHERE a IN (SELECT k FROM t2 EXCEPT SELECT k FROM t3)
intersect_correlated: SELECT id FROM t1 WHERE EXISTS (SELECT x FROM t2 WHERE t2.k = t1.a INTERSECT SELECT b FROM t1 AS o WHERE o.id <> t1.id)
except_correlated: SELECT id, (SELECT COUNT(*) FROM (SELECT x FROM t2 WHERE t2.k = t1.a EXCEPT ALL SELECT b FROM t1 AS o WHERE o.a = t1.a) q) AS n FROM t1
sqlite: SELECT id, (SELECT COUNT(*) FROM (SELECT x, ROW_NUMBER() OVER (PARTITION BY x) FROM t2 WHERE t2.k = t1.a EXCEPT SELECT b, ROW_NUMBER() OVER (PARTITION BY b) FROM t1 AS o WHERE o.a = t1.a) q) FROM t1
distinct_s: SELECT DISTINCT s FROM t1
distinct_two: SELECT DISTINCT k, y FROM t2
distinct_expr: SELECT DISTINCT a % 3 AS r, s IS NULL AS sn FROM t1
distinct_join: SELECT DISTINCT t3.name FROM t2 JOIN t3 ON t2.k = t3.k
distinct_count: SELECT COUNT(*) AS n FROM (SELECT DISTINCT k, cat FROM e) q
distinct_after_agg: SELECT DISTINCT n FROM (SELECT k, COUNT(*) AS n FROM t2 GROUP BY k) q
distinct_union_all: SELECT DISTINCT v FROM (SELECT a AS v FROM t1 UNION ALL SELECT b FROM t1) q
distinct_star: SELECT DISTINCT * FROM t2
distinct_double: SELECT DISTINCT c FROM t2

# --- WITH ---------------------------------------------------------------------------

cte_simple: WITH big AS (SELECT * FROM e WHERE amount > 30) SELECT k, COUNT(*) AS n FROM big GROUP BY k
cte_two: WITH a AS (SELECT k, SUM(x) AS sx FROM t2 GROUP BY k), b AS (SELECT k, COUNT(*) AS n FROM e GROUP BY k)
    SELECT a.k, a.sx, b.n FROM a JOIN b ON a.k = b.k
cte_chain: WITH a AS (SELECT id, a + b AS ab FROM t1), b AS (SELECT id, ab * 2 AS ab2 FROM a WHERE ab > 20) SELECT * FROM b
cte_twice: WITH c AS (SELECT k, COUNT(*) AS n FROM t2 GROUP BY k) SELECT x.k AS k1, y.k AS k2 FROM c x JOIN c y ON x.n = y.n
cte_columns: WITH c (kk, nn) AS (SELECT k, COUNT(*) FROM e GROUP BY k) SELECT kk, nn FROM c WHERE nn > 2
cte_union: WITH ks AS (SELECT k FROM t2 UNION SELECT k FROM u) SELECT COUNT(*) AS n, SUM(k) AS s FROM ks
cte_in_subquery: SELECT * FROM (WITH q AS (SELECT k, v FROM u) SELECT k, v FROM q WHERE v > 0) z
cte_shadows_table: WITH t3 AS (SELECT k, 'shadow' AS name, 0 AS w FROM t2) SELECT DISTINCT name FROM t3
cte_outer_join: WITH a AS (SELECT DISTINCT k FROM e), b AS (SELECT k, v FROM u) SELECT a.k AS ak, b.v FROM a LEFT JOIN b ON a.k = b.k

# --- Views over views ------------------------------------------------------------

view v_t1_pos: SELECT id, a, b, s FROM t1 WHERE a > 0
view v_e_big: SELECT id, k, amount, cat, ts FROM e WHERE amount >= 10
view v_cat_stats: SELECT cat, COUNT(*) AS n, SUM(amount) AS total FROM v_e_big GROUP BY cat
view v_renamed (x, y): SELECT a, s FROM t1
view v_t1_pos_b: SELECT id, a FROM v_t1_pos WHERE b > 10
vv_group: SELECT s, COUNT(*) AS n FROM v_t1_pos GROUP BY s
vv_filter: SELECT * FROM v_cat_stats WHERE n > 3
vv_join: SELECT v.cat, v.total, t3.name FROM v_cat_stats v JOIN t3 ON v.n % 9 = t3.k
vv_two_levels: SELECT COUNT(*) AS n, SUM(a) AS s FROM v_t1_pos_b
vv_renamed: SELECT x, y FROM v_renamed WHERE x > 0
vv_self_join: SELECT a.id, b.id AS bid FROM v_t1_pos a JOIN v_t1_pos b ON a.s = b.s AND a.id < b.id WHERE a.a > 80
vv_union: SELECT id FROM v_t1_pos UNION SELECT id FROM v_e_big
vv_materialized: SELECT s, n * 2 AS n2 FROM agg_group_s WHERE n > 1
vv_window: SELECT window_start, COUNT(*) AS n FROM TUMBLE(v_e_big, ts, INTERVAL '4' HOUR) GROUP BY window_start
sqlite: SELECT datetime(CAST(strftime('%s', ts) AS INTEGER) / 14400 * 14400, 'unixepoch') AS ws, COUNT(*) FROM v_e_big WHERE ts IS NOT NULL GROUP BY ws

# --- TUMBLE and HOP windows ------------------------------------------------------

tumble_hour: SELECT window_start, window_end, COUNT(*) AS n, SUM(amount) AS total FROM TUMBLE(e, ts, INTERVAL '1' HOUR) GROUP BY window_start, window_end
sqlite: SELECT datetime(es / 3600 * 3600, 'unixepoch') AS ws, datetime(es / 3600 * 3600 + 3600, 'unixepoch') AS we, COUNT(*), SUM(amount)
    FROM e_s WHERE es IS NOT NULL GROUP BY ws, we
tumble_15m_cat: SELECT cat, window_start, COUNT(*) AS n FROM TUMBLE(e, ts, INTERVAL '15' MINUTE) GROUP BY cat, window_start
sqlite: SELECT cat, datetime(es / 900 * 900, 'unixepoch') AS ws, COUNT(*) FROM e_s WHERE es IS NOT NULL GROUP BY cat, ws
tumble_day: SELECT window_start, window_end, MAX(price) AS mp, COUNT(DISTINCT k) AS dk FROM TUMBLE(e, ts, INTERVAL '1' DAY) GROUP BY window_start, window_end
sqlite: SELECT datetime(es / 86400 * 86400, 'unixepoch') AS ws, datetime(es / 86400 * 86400 + 86400, 'unixepoch') AS we, MAX(price), COUNT(DISTINCT k)
    FROM e_s WHERE es IS NOT NULL GROUP BY ws, we
tumble_rows: SELECT id, window_start, window_end FROM TUMBLE(e, ts, INTERVAL '6' HOUR) WHERE amount > 40
sqlite: SELECT id, datetime(es / 21600 * 21600, 'unixepoch'), datetime(es / 21600 * 21600 + 21600, 'unixepoch') FROM e_s WHERE es IS NOT NULL AND amount > 40
tumble_alias: SELECT w.window_start, COUNT(*) AS n, SUM(w.a) AS sa FROM TUMBLE(t1, ts, INTERVAL '2' HOUR) AS w WHERE w.a > 10 GROUP BY w.window_start
sqlite: SELECT datetime(ts_s / 7200 * 7200, 'unixepoch') AS ws, COUNT(*), SUM(a) FROM t1_s WHERE ts_s IS NOT NULL AND a > 10 GROUP BY ws
tumble_having: SELECT window_start, SUM(amount) AS s FROM TUMBLE(e, ts, INTERVAL '1' HOUR) GROUP BY window_start HAVING COUNT(*) >= 3
sqlite: SELECT datetime(es / 3600 * 3600, 'unixepoch') AS ws, SUM(amount) FROM e_s WHERE es IS NOT NULL GROUP BY ws HAVING COUNT(*) >= 3
tumble_join: SELECT w.window_start, t3.name, COUNT(*) AS n FROM TUMBLE(e, ts, INTERVAL '1' DAY) w JOIN t3 ON w.k = t3.k GROUP BY w.window_start, t3.name
sqlite: SELECT datetime(es / 86400 * 86400, 'unixepoch') AS ws, t3.name, COUNT(*) FROM e_s JOIN t3 ON e_s.k = t3.k WHERE es IS NOT NULL GROUP BY ws, t3.name
tumble_global: SELECT COUNT(*) AS n, COUNT(DISTINCT window_start) AS windows FROM TUMBLE(e, ts, INTERVAL '3' HOUR)
sqlite: SELECT COUNT(*), COUNT(DISTINCT es / 10800) FROM e_s WHERE es IS NOT NULL
tumble_minute_end: SELECT window_end, MIN(ts) AS first, MAX(ts) AS last FROM TUMBLE(e, ts, INTERVAL '20' MINUTE) GROUP BY window_end
sqlite: SELECT datetime(es / 1200 * 1200 + 1200, 'unixepoch') AS we, MIN(ts), MAX(ts) FROM e_s WHERE es IS NOT NULL GROUP BY we
hop: SELECT window_start, window_end, COUNT(*) AS n FROM HOP(e, ts, INTERVAL '30' MINUTE, INTERVAL '2' HOUR) GROUP BY window_start, window_end
sqlite: SELECT datetime(es / 1800 * 1800 - i * 1800, 'unixepoch') AS ws, datetime(es / 1800 * 1800 - i * 1800 + 7200, 'unixepoch') AS we, COUNT(*)
    FROM e_s JOIN nums ON i < 4 WHERE es IS NOT NULL GROUP BY ws, we
hop_cat: SELECT cat, window_start, SUM(amount) AS s FROM HOP(e, ts, INTERVAL '1' HOUR, INTERVAL '3' HOUR) GROUP BY cat, window_start
sqlite: SELECT cat, datetime(es / 3600 * 3600 - i * 3600, 'unixepoch') AS ws, SUM(amount) FROM e_s JOIN nums ON i < 3 WHERE es IS NOT NULL GROUP BY cat, ws
hop_t1: SELECT window_start, COUNT(*) AS n, SUM(a) AS sa, MAX(c) AS mc FROM HOP(t1, ts, INTERVAL '6' HOUR, INTERVAL '1' DAY) GROUP BY window_start
sqlite: SELECT datetime(ts_s / 21600 * 21600 - i * 21600, 'unixepoch') AS ws, COUNT(*), SUM(a), MAX(c) FROM t1_s JOIN nums ON i < 4 WHERE ts_s IS NOT NULL GROUP BY ws
hop_rows: SELECT id, window_start FROM HOP(e, ts, INTERVAL '2' HOUR, INTERVAL '4' HOUR) WHERE k = 3
sqlite: SELECT id, datetime(es / 7200 * 7200 - i * 7200, 'unixepoch') FROM e_s JOIN nums ON i < 2 WHERE es IS NOT NULL AND k = 3
hop_u_join: SELECT h.window_start, u.w, COUNT(*) AS n FROM HOP(e, ts, INTERVAL '12' HOUR, INTERVAL '1' DAY) h JOIN u ON h.k = u.k GROUP BY h.window_start, u.w
sqlite: SELECT datetime(es / 43200 * 43200 - i * 43200, 'unixepoch') AS ws, u.w, COUNT(*) FROM e_s JOIN nums ON i < 2 JOIN u ON e_s.k = u.k WHERE es IS NOT NULL GROUP BY ws, u.w
tumble_topk: SELECT cat, window_start, n FROM (SELECT cat, window_start, n, ROW_NUMBER() OVER (PARTITION BY cat ORDER BY n DESC, window_start) AS rn
    FROM (SELECT cat, window_start, COUNT(*) AS n FROM TUMBLE(e, ts, INTERVAL '6' HOUR) GROUP BY cat, window_start) q) r WHERE rn <= 2
sqlite: SELECT cat, ws, n FROM (SELECT cat, ws, n, ROW_NUMBER() OVER (PARTITION BY cat ORDER BY n DESC, ws) AS rn
    FROM (SELECT cat, datetime(es / 21600 * 21600, 'unixepoch') AS ws, COUNT(*) AS n FROM e_s WHERE es IS NOT NULL GROUP BY cat, ws) q) r WHERE rn <= 2

cumulate_hour: SELECT window_start, window_end, COUNT(*) AS n, SUM(amount) AS s FROM CUMULATE(e, ts, INTERVAL '15' MINUTE, INTERVAL '1' HOUR) GROUP BY window_start, window_end
sqlite: SELECT datetime(es / 3600 * 3600, 'unixepoch') AS ws, datetime(es / 3600 * 3600 + (i + 1) * 900, 'unixepoch') AS we, COUNT(*), SUM(amount)
    FROM e_s JOIN nums ON i < 4 WHERE es IS NOT NULL AND es / 3600 * 3600 + (i + 1) * 900 > es GROUP BY ws, we
cumulate_t1: SELECT window_end, COUNT(*) AS n, MAX(a) AS ma FROM CUMULATE(t1, ts, INTERVAL '6' HOUR, INTERVAL '1' DAY) GROUP BY window_end
sqlite: SELECT datetime(ts_s / 86400 * 86400 + (i + 1) * 21600, 'unixepoch') AS we, COUNT(*), MAX(a)
    FROM t1_s JOIN nums ON i < 4 WHERE ts_s IS NOT NULL AND ts_s / 86400 * 86400 + (i + 1) * 21600 > ts_s GROUP BY we
cumulate_rows: SELECT id, window_start, window_end FROM CUMULATE(e, ts, INTERVAL '2' HOUR, INTERVAL '6' HOUR) WHERE k = 2
sqlite: SELECT id, datetime(es / 21600 * 21600, 'unixepoch'), datetime(es / 21600 * 21600 + (i + 1) * 7200, 'unixepoch')
    FROM e_s JOIN nums ON i < 3 WHERE es IS NOT NULL AND k = 2 AND es / 21600 * 21600 + (i + 1) * 7200 > es

# --- SESSION windows (SQLite has none: sessions from LAG and a running SUM) ---------

# ours: a session is the rows of a key whose times follow each other by less than the gap.
session_rows: SELECT id, window_start, window_end FROM SESSION(t1, ts, INTERVAL '2' HOUR, a % 3)
sqlite: WITH o AS (SELECT id, a % 3 AS g, ts_s, ts_s - LAG(ts_s) OVER (PARTITION BY a % 3 ORDER BY ts_s, id) AS d FROM t1_s WHERE ts_s IS NOT NULL),
    s AS (SELECT id, g, ts_s, SUM(CASE WHEN d IS NULL OR d >= 7200 THEN 1 ELSE 0 END) OVER (PARTITION BY g ORDER BY ts_s, id ROWS UNBOUNDED PRECEDING) AS sid FROM o)
    SELECT id, datetime(MIN(ts_s) OVER (PARTITION BY g, sid), 'unixepoch'), datetime(MAX(ts_s) OVER (PARTITION BY g, sid) + 7200, 'unixepoch') FROM s
session_global: SELECT window_start, window_end, COUNT(*) AS n, SUM(b) AS sb FROM SESSION(t1, ts, INTERVAL '3' HOUR) GROUP BY window_start, window_end
sqlite: WITH o AS (SELECT id, b, ts_s, ts_s - LAG(ts_s) OVER (ORDER BY ts_s, id) AS d FROM t1_s WHERE ts_s IS NOT NULL),
    s AS (SELECT b, ts_s, SUM(CASE WHEN d IS NULL OR d >= 10800 THEN 1 ELSE 0 END) OVER (ORDER BY ts_s, id ROWS UNBOUNDED PRECEDING) AS sid FROM o)
    SELECT datetime(MIN(ts_s), 'unixepoch'), datetime(MAX(ts_s) + 10800, 'unixepoch'), COUNT(*), SUM(b) FROM s GROUP BY sid
session_e: SELECT k, window_start, COUNT(*) AS n, MAX(amount) AS top FROM SESSION(e, ts, INTERVAL '90' MINUTE, k) GROUP BY k, window_start
sqlite: WITH o AS (SELECT id, k, amount, ts, ep, ep - LAG(ep) OVER (PARTITION BY k ORDER BY ep, id) AS d FROM e_s WHERE ep IS NOT NULL),
    s AS (SELECT k, amount, ts, SUM(CASE WHEN d IS NULL OR d >= 5400 THEN 1 ELSE 0 END) OVER (PARTITION BY k ORDER BY ep, id ROWS UNBOUNDED PRECEDING) AS sid FROM o)
    SELECT k, MIN(ts), COUNT(*), MAX(amount) FROM s GROUP BY k, sid
session_filtered: SELECT s.cat, COUNT(*) AS sessions FROM (SELECT DISTINCT cat, window_start FROM SESSION(e, ts, INTERVAL '1' HOUR, cat) WHERE amount > 10) s GROUP BY s.cat
sqlite: WITH o AS (SELECT id, cat, amount, ep, ep - LAG(ep) OVER (PARTITION BY cat ORDER BY ep, id) AS d FROM e_s WHERE ep IS NOT NULL),
    s AS (SELECT cat, amount, SUM(CASE WHEN d IS NULL OR d >= 3600 THEN 1 ELSE 0 END) OVER (PARTITION BY cat ORDER BY ep, id ROWS UNBOUNDED PRECEDING) AS sid FROM o)
    SELECT cat, COUNT(DISTINCT sid) FROM s WHERE amount > 10 GROUP BY cat

# --- Top-k: ROW_NUMBER and ORDER BY ... LIMIT ------------------------------------

topk_partition: SELECT id, k, amount, rn FROM (SELECT id, k, amount, ROW_NUMBER() OVER (PARTITION BY k ORDER BY amount DESC, id) AS rn FROM e) q WHERE rn <= 3
topk_rn1: SELECT id, cat, price FROM (SELECT id, cat, price, ROW_NUMBER() OVER (PARTITION BY cat ORDER BY price, id) AS rn FROM e) q WHERE rn = 1
topk_lt: SELECT id, k, rn FROM (SELECT id, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts, id) AS rn FROM e) q WHERE rn < 3
topk_ge_form: SELECT id, k, rn FROM (SELECT id, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY id DESC) AS rn FROM e) q WHERE 2 >= rn
topk_no_partition: SELECT id, a, rn FROM (SELECT id, a, ROW_NUMBER() OVER (ORDER BY a DESC, id) AS rn FROM t1) q WHERE rn <= 5
topk_nulls_first_asc: SELECT id, a, rn FROM (SELECT id, a, ROW_NUMBER() OVER (ORDER BY a, id) AS rn FROM t1) q WHERE rn <= 5
topk_nulls_last: SELECT id, a, rn FROM (SELECT id, a, ROW_NUMBER() OVER (ORDER BY a NULLS LAST, id) AS rn FROM t1) q WHERE rn <= 5
topk_desc_nulls_first: SELECT id, b, rn FROM (SELECT id, b, ROW_NUMBER() OVER (ORDER BY b DESC NULLS FIRST, id) AS rn FROM t1) q WHERE rn <= 5
topk_t1_s: SELECT id, s, a, rn FROM (SELECT id, s, a, ROW_NUMBER() OVER (PARTITION BY s ORDER BY a DESC, id) AS rn FROM t1) q WHERE rn <= 2
topk_u: SELECT k, v, rn FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY w ORDER BY v DESC, k) AS rn FROM u) q WHERE rn <= 2
topk_hidden_rn: SELECT id, k FROM (SELECT id, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC, id) AS rn FROM e) q WHERE rn <= 2
topk_extra_filter: SELECT id, k, amount FROM (SELECT id, k, amount, ROW_NUMBER() OVER (PARTITION BY k ORDER BY amount, id) AS rn FROM e) q WHERE rn <= 3 AND amount > 10
topk_t2_whole_row: SELECT k, x, y, c, rn FROM (SELECT k, x, y, c, ROW_NUMBER() OVER (PARTITION BY k % 3 ORDER BY x DESC, k, y, c) AS rn FROM t2) q WHERE rn <= 3
topk_join: SELECT * FROM (SELECT t3.name, e.id, e.amount, ROW_NUMBER() OVER (PARTITION BY t3.name ORDER BY e.amount DESC, e.id) AS rn FROM e JOIN t3 ON e.k = t3.k) q WHERE rn <= 2
topk_agg_sub: SELECT cat, k, n FROM (SELECT cat, k, n, ROW_NUMBER() OVER (PARTITION BY cat ORDER BY n DESC, k) AS rn FROM (SELECT cat, k, COUNT(*) AS n FROM e GROUP BY cat, k) a) b WHERE rn <= 2
topk_partition_expr: SELECT id, rn FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY id % 4, cat ORDER BY price DESC, id) AS rn FROM e) q WHERE rn <= 1
topk_then_agg: SELECT k, SUM(amount) AS top3 FROM (SELECT k, amount, ROW_NUMBER() OVER (PARTITION BY k ORDER BY amount DESC, id) AS rn FROM e) q WHERE rn <= 3 GROUP BY k
topk_order_text: SELECT id, s, rn FROM (SELECT id, s, ROW_NUMBER() OVER (ORDER BY s DESC, id) AS rn FROM t1) q WHERE rn <= 4
topk_cte: WITH ranked AS (SELECT id, k, price, ROW_NUMBER() OVER (PARTITION BY k ORDER BY price DESC, id) AS rn FROM e) SELECT id, k, price FROM ranked WHERE rn <= 2
topk_order_decimal: SELECT id, d, rn FROM (SELECT id, d, ROW_NUMBER() OVER (PARTITION BY a % 2 ORDER BY d DESC, id) AS rn FROM t1) q WHERE rn <= 3
limit_simple: SELECT id, amount FROM e ORDER BY amount DESC, id LIMIT 5
limit_asc_nulls: SELECT id, a FROM t1 ORDER BY a, id LIMIT 7
limit_desc_nulls: SELECT id, b FROM t1 ORDER BY b DESC, id DESC LIMIT 7
limit_nulls_first: SELECT id, c FROM t1 ORDER BY c DESC NULLS FIRST, id LIMIT 4
limit_expr: SELECT id, a + b AS ab FROM t1 ORDER BY a + b DESC, id LIMIT 4
limit_position: SELECT id, c FROM t1 ORDER BY 2 DESC, 1 LIMIT 6
limit_alias: SELECT id, a * 2 AS dbl FROM t1 ORDER BY dbl, id LIMIT 3
limit_zero: SELECT id FROM t1 ORDER BY id LIMIT 0
limit_large: SELECT id, k FROM e ORDER BY id LIMIT 100000
limit_agg: SELECT k, COUNT(*) AS n FROM e GROUP BY k ORDER BY n DESC, k LIMIT 3
limit_then_agg: SELECT SUM(amount) AS s, COUNT(*) AS n FROM (SELECT id, amount FROM e ORDER BY amount DESC, id LIMIT 10) q
limit_text: SELECT s, id FROM t1 ORDER BY s DESC, id LIMIT 5
limit_ts: SELECT id, ts FROM e ORDER BY ts DESC, id LIMIT 5
limit_join: SELECT t3.name, e.amount, e.id FROM e JOIN t3 ON e.k = t3.k ORDER BY e.amount DESC, e.id LIMIT 5
limit_union: SELECT v FROM (SELECT a AS v FROM t1 UNION SELECT x FROM t2) q ORDER BY v DESC LIMIT 5
limit_distinct: SELECT DISTINCT cat FROM e ORDER BY cat LIMIT 3
limit_u: SELECT k, v FROM u ORDER BY v, k LIMIT 4
limit_t2_dups: SELECT k, x FROM t2 ORDER BY x DESC, k LIMIT 6
# ORDER BY keys that are not output columns (computed as hidden columns).
limit_unselected_order: SELECT amount FROM e ORDER BY amount DESC, id LIMIT 4
limit_unselected_expr: SELECT id FROM t1 ORDER BY a * b DESC, id LIMIT 5
limit_unselected_agg: SELECT k FROM e GROUP BY k ORDER BY COUNT(*) DESC, SUM(amount), k LIMIT 3
limit_unselected_mixed: SELECT cat, id AS i FROM e ORDER BY price DESC, i LIMIT 4
limit_unselected_star: SELECT * FROM t3 ORDER BY w * -1, k LIMIT 2
limit_unselected_sub: SELECT SUM(amount) AS s FROM (SELECT amount FROM e ORDER BY price, id LIMIT 10) q

# --- Miscellany ------------------------------------------------------------------------

# -0.0 equals 0.0: one group, one distinct value, a join match.
negzero_distinct: SELECT DISTINCT c * 0 AS z FROM t1 WHERE c IS NOT NULL
negzero_group: SELECT c * 0 AS z, COUNT(*) AS n FROM t1 WHERE c IS NOT NULL GROUP BY c * 0
negzero_count_distinct: SELECT COUNT(DISTINCT c * 0) AS n, COUNT(DISTINCT -(c * 0)) AS m FROM t1
negzero_join: SELECT COUNT(*) AS n FROM t2 p JOIN t2 q ON p.c * 0 = q.c * 0 AND p.k = q.k
negzero_union: SELECT c * 0 AS z FROM t1 UNION SELECT c * 0 FROM t2
misc_const_select: SELECT 1 AS one, 'x' AS s, NULL AS n, 2.5 AS d, TRUE AS t
misc_unicode: SELECT length('naïve') AS n, substring('naïve', 3, 2) AS s, position('v' IN 'naïve') AS p, 'ü' || 'x' AS c
sqlite: SELECT length('naïve'), substr('naïve', 3, 2), instr('naïve', 'v'), 'ü' || 'x'
misc_quoted_names: SELECT "id", "a" AS "A" FROM t1 WHERE "a" > 50
misc_qualified_star: SELECT t3.* FROM t3 JOIN u ON t3.k = u.k
misc_case_insensitive_names: SELECT ID, A + B AS SUM_AB FROM T1 WHERE S IS NOT NULL
misc_many_exprs: SELECT id, a, a + 1 AS a1, a * a AS a2, b - a AS ba, COALESCE(s, '') || '|' || COALESCE(CAST(b AS TEXT), '') AS sb FROM t1
misc_group_by_all_cols: SELECT k, x, y, c, COUNT(*) AS n FROM t2 GROUP BY k, x, y, c

# --- Subqueries in expressions (decorrelated into joins in a view) ------------------

sub_scalar_global: SELECT id, a, (SELECT MAX(x) FROM t2) AS mx FROM t1
sub_scalar_from_less: SELECT (SELECT COUNT(*) FROM t1) AS n, (SELECT MAX(a) FROM t1) AS m
sub_scalar_arith: SELECT id, a - (SELECT MIN(a) FROM t1) AS from_min FROM t1
sub_scalar_case: SELECT id, CASE WHEN c > (SELECT AVG(c) FROM t1) THEN a * 2 ELSE b * 10 END AS x FROM t1
sub_scalar_where: SELECT id FROM t1 WHERE c > (SELECT AVG(c) FROM t1)
sub_scalar_corr_count: SELECT id, (SELECT COUNT(*) FROM t2 WHERE t2.k = t1.a) AS n FROM t1
sub_scalar_corr_theta: SELECT id, (SELECT COUNT(*) FROM t1 AS x WHERE x.b < t1.b) AS n FROM t1
sub_scalar_corr_two: SELECT id, (SELECT COUNT(*) FROM t2 WHERE t2.k = t1.a AND t2.x < t1.b) AS n FROM t1
sub_scalar_corr_null_outer: SELECT id, (SELECT COUNT(*) FROM t2 WHERE t2.x = t1.b) AS n, (SELECT MIN(y) FROM t2 WHERE t2.x = t1.b) AS m FROM t1
sub_scalar_corr_sum: SELECT k, (SELECT SUM(amount) FROM e WHERE e.k = t3.k) AS total FROM t3
sub_scalar_corr_where: SELECT id, a FROM t1 WHERE a > (SELECT AVG(x) FROM t2 WHERE t2.k = t1.id % 7)
sub_scalar_corr_is_null: SELECT id FROM t1 WHERE (SELECT COUNT(*) FROM t2 WHERE t2.x IS NULL AND t1.b IS NULL) > 0
sub_scalar_limit_1: SELECT k, (SELECT name FROM t3 WHERE t3.k = u.k LIMIT 1) AS name FROM u
sub_scalar_top_1: SELECT id, (SELECT x FROM t2 WHERE t2.k = t1.a ORDER BY x DESC LIMIT 1) AS top FROM t1
sub_scalar_corr_join: SELECT id, (SELECT COUNT(*) FROM t2 JOIN t3 ON t2.k = t3.k WHERE t3.w > t1.a) AS n FROM t1
sub_scalar_self_e: SELECT id, amount, (SELECT COUNT(*) FROM e AS f WHERE f.k = e.k) AS same_k FROM e
sub_scalar_sqllogic: SELECT a + b * 2 AS x, (SELECT COUNT(*) FROM t1 AS x WHERE x.c > t1.c AND x.d < t1.d) AS n FROM t1 WHERE (a > b - 2 AND a < b + 2) OR c > d
sub_scalar_two_in_select: SELECT id, (SELECT MAX(x) FROM t2 WHERE t2.k = t1.a) AS hi, (SELECT MIN(x) FROM t2 WHERE t2.k = t1.a) AS lo FROM t1
sub_scalar_under_agg: SELECT k, COUNT(*) AS n FROM t2 WHERE x > (SELECT AVG(a) FROM t1) GROUP BY k
sub_scalar_over_join: SELECT t1.id, t3.name FROM t1 JOIN t3 ON t1.a = t3.k WHERE t3.w > (SELECT AVG(w) FROM t3)
sub_exists: SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.k = t1.a)
sub_not_exists: SELECT id FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.k = t1.a)
sub_exists_theta: SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t1 AS x WHERE x.b < t1.b)
sub_exists_value: SELECT k, EXISTS (SELECT 1 FROM e WHERE e.k = t3.k AND e.amount > 5) AS has FROM t3
sub_exists_uncorrelated: SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t4)
sub_exists_upsert: SELECT k, v FROM u WHERE EXISTS (SELECT 1 FROM t3 WHERE t3.k = u.k)
sub_exists_or: SELECT id FROM t1 WHERE a > 50 OR EXISTS (SELECT 1 FROM t3 WHERE t3.k = t1.a)
sub_in: SELECT id FROM t1 WHERE a IN (SELECT k FROM t2)
sub_not_in_nulls: SELECT id, a FROM t1 WHERE a NOT IN (SELECT x FROM t2)
sub_not_in: SELECT id FROM t1 WHERE a NOT IN (SELECT x FROM t2 WHERE x IS NOT NULL)
sub_in_value: SELECT id, a IN (SELECT x FROM t2) AS i, b NOT IN (SELECT k FROM t3) AS n FROM t1
sub_in_empty: SELECT id, a IN (SELECT a FROM t0) AS i, a NOT IN (SELECT a FROM t0) AS n FROM t1
sub_in_changing: SELECT id, a IN (SELECT a FROM t4) AS i FROM t1
sub_in_mixed_types: SELECT id, c IN (SELECT x FROM t2) AS i FROM t1
sub_in_corr: SELECT id FROM t1 WHERE b IN (SELECT x FROM t2 WHERE t2.k = t1.id % 7)
sub_in_corr_value: SELECT id, b IN (SELECT x FROM t2 WHERE t2.k = t1.a) AS i FROM t1
sub_in_under_agg: SELECT k, COUNT(*) AS n FROM t2 WHERE x IN (SELECT a FROM t1) GROUP BY k
sub_in_union: SELECT id FROM t1 WHERE a IN (SELECT k FROM t2 UNION SELECT k FROM t3)
# SQLite has no ANY/ALL: the same answers from per-row comparisons summed (TRUE if one is TRUE, else
# NULL if one is NULL, else FALSE; ALL: FALSE if one is FALSE, else NULL if one is NULL, else TRUE).
any_lt: SELECT id, a < ANY (SELECT x FROM t2) AS p FROM t1
sqlite: SELECT id, (SELECT CASE WHEN SUM(t1.a < x) > 0 THEN 1 WHEN SUM((t1.a < x) IS NULL) > 0 THEN NULL ELSE 0 END FROM t2) FROM t1
any_eq_correlated: SELECT id, a = ANY (SELECT x FROM t2 WHERE t2.k = t1.b) AS p FROM t1
sqlite: SELECT id, (SELECT CASE WHEN SUM(t1.a = x) > 0 THEN 1 WHEN SUM((t1.a = x) IS NULL) > 0 THEN NULL ELSE 0 END FROM t2 WHERE t2.k = t1.b) FROM t1
all_gt_correlated: SELECT id, a > ALL (SELECT b FROM t1 AS o WHERE o.s = t1.s AND o.id <> t1.id) AS p FROM t1
sqlite: SELECT id, (SELECT CASE WHEN SUM(NOT (t1.a > o.b)) > 0 THEN 0 WHEN SUM((t1.a > o.b) IS NULL) > 0 THEN NULL ELSE 1 END FROM t1 AS o WHERE o.s = t1.s AND o.id <> t1.id) FROM t1
some_where: SELECT id FROM t1 WHERE b >= SOME (SELECT x FROM t2 WHERE x < 20)
sqlite: SELECT id FROM t1 WHERE (SELECT CASE WHEN SUM(t1.b >= x) > 0 THEN 1 WHEN SUM((t1.b >= x) IS NULL) > 0 THEN NULL ELSE 0 END FROM t2 WHERE x < 20)
all_where_empty: SELECT id, a FROM t1 WHERE a <> ALL (SELECT a FROM t0)
sqlite: SELECT id, a FROM t1
all_ne_nulls: SELECT id, a <> ALL (SELECT k FROM t2) AS p, NOT (a <> ALL (SELECT k FROM t2)) AS q FROM t1
sqlite: SELECT id, a NOT IN (SELECT k FROM t2), a IN (SELECT k FROM t2) FROM t1
any_text: SELECT k, y = ANY (SELECT s FROM t1 WHERE a > 50) AS p FROM t2
sqlite: SELECT k, (SELECT CASE WHEN SUM(t2.y = s) > 0 THEN 1 WHEN SUM((t2.y = s) IS NULL) > 0 THEN NULL ELSE 0 END FROM t1 WHERE a > 50) FROM t2
sub_in_text: SELECT id FROM t1 WHERE s IN (SELECT y FROM t2)

# --- ORDER BY without LIMIT: accepted with a notice, the order dropped -------------

order_no_limit: SELECT id, a FROM t1 ORDER BY a DESC, id
order_in_subquery: SELECT k, n FROM (SELECT k, COUNT(*) AS n FROM t2 GROUP BY k ORDER BY n) q
order_by_position: SELECT k, x FROM t2 ORDER BY 2, 1

# --- DISTINCT aggregates ---------------------------------------------------------------

agg_distinct_group: SELECT k, SUM(DISTINCT x) AS s, AVG(DISTINCT x) AS a, COUNT(DISTINCT x) AS n, SUM(x) AS t FROM t2 GROUP BY k
agg_distinct_global: SELECT SUM(DISTINCT a) AS s, AVG(DISTINCT b) AS av, MIN(DISTINCT a) AS mn, MAX(DISTINCT b) AS mx, COUNT(*) AS n FROM t1
agg_distinct_empty: SELECT SUM(DISTINCT a) AS s, AVG(DISTINCT b) AS av, COUNT(*) AS n FROM t0
agg_distinct_changing: SELECT SUM(DISTINCT a) AS s, COUNT(DISTINCT b) AS n FROM t4
agg_distinct_null_group: SELECT x, SUM(DISTINCT k) AS s, COUNT(*) AS n FROM t2 GROUP BY x
agg_distinct_double: SELECT k, SUM(DISTINCT c) AS s, AVG(DISTINCT c) AS a FROM t2 GROUP BY k
# ours: a DECIMAL's AVG keeps 6 fractional digits.
agg_distinct_decimal: SELECT a % 3 AS r, SUM(DISTINCT d) AS s, AVG(DISTINCT d) AS av FROM t1 GROUP BY a % 3
sqlite: SELECT a % 3 AS r, SUM(DISTINCT d), ROUND(AVG(DISTINCT d), 6) FROM t1 GROUP BY a % 3
agg_distinct_having: SELECT k, SUM(DISTINCT x) AS s FROM t2 GROUP BY k HAVING SUM(DISTINCT x) > 10
agg_distinct_expr: SELECT k, SUM(DISTINCT x % 5) + 1 AS s, SUM(DISTINCT x) - SUM(DISTINCT k) AS d FROM t2 GROUP BY k
agg_distinct_only: SELECT k, AVG(DISTINCT x) AS a FROM t2 GROUP BY k
agg_distinct_upsert: SELECT w, SUM(DISTINCT v) AS s, AVG(DISTINCT v) AS a FROM u GROUP BY w
agg_distinct_append_only: SELECT cat, SUM(DISTINCT amount) AS s, COUNT(DISTINCT k) AS n, MAX(DISTINCT price) AS mx FROM e GROUP BY cat
# FILTER: SQLite 3.30+ has it.
agg_filter: SELECT k, COUNT(*) FILTER (WHERE x > 10) AS big, SUM(x) FILTER (WHERE y IS NOT NULL) AS sy, COUNT(*) AS n FROM t2 GROUP BY k
agg_filter_global: SELECT COUNT(*) FILTER (WHERE a > b) AS gt, MAX(c) FILTER (WHERE a < 50) AS mc, AVG(b) FILTER (WHERE s IS NULL) AS av FROM t1
agg_filter_distinct: SELECT k, COUNT(DISTINCT x) FILTER (WHERE x % 2 = 0) AS even, SUM(DISTINCT x) FILTER (WHERE x > 0) AS pos FROM t2 GROUP BY k
# ours: bool_and/bool_or; SQLite: MIN/MAX of 0/1.
agg_bool: SELECT k, bool_and(x > 5) AS all_big, bool_or(x > 50) AS any_huge, every(y IS NOT NULL) AS all_y FROM t2 GROUP BY k
sqlite: SELECT k, MIN(x > 5), MAX(x > 50), MIN(y IS NOT NULL) FROM t2 GROUP BY k

# --- Subqueries inside subqueries ------------------------------------------------------

sub_nested_in: SELECT id FROM t1 WHERE a IN (SELECT k FROM t2 WHERE x IN (SELECT b FROM t1 WHERE c > 0.5))
sub_nested_two_levels_out: SELECT id, (SELECT COUNT(*) FROM t2 WHERE t2.k = t1.a AND EXISTS (SELECT 1 FROM t3 WHERE t3.k = t2.x AND t3.w > t1.b)) AS n FROM t1
sub_nested_scalar: SELECT k, (SELECT MAX(x) FROM t2 WHERE t2.k = t3.k AND t2.x < (SELECT AVG(x) FROM t2)) AS m FROM t3
sub_nested_not_in: SELECT id FROM t1 WHERE b NOT IN (SELECT x FROM t2 WHERE x IS NOT NULL AND k NOT IN (SELECT k FROM t3))

# --- SQLite's own forms --------------------------------------------------------------------

# `x IN name` is `x IN (SELECT * FROM name)` (SQLite reserves names starting sqlite_).
view one_col_k: SELECT k FROM t2
view one_col_empty: SELECT a FROM t0
lite_in_view: SELECT id FROM t1 WHERE a IN one_col_k
lite_in_empty_view: SELECT id, a IN one_col_empty AS i, a NOT IN one_col_empty AS n FROM t1
# total(): SUM as a float, 0.0 over no values.
lite_total: SELECT k, total(x) AS t, total(DISTINCT x) AS td FROM t2 GROUP BY k
lite_total_empty: SELECT total(a) AS t, total(b) FILTER (WHERE b > 1000) AS none FROM t1
# SQLite renames a repeated column (k:1); ours names it k_2, with a notice.
dup_names: SELECT a.k, b.k, a.x FROM t2 a JOIN t3 b ON a.k = b.k
dup_names_unnamed: SELECT DISTINCT x + 1, x * 2 FROM t2
unary_plus_any: SELECT + s AS ps, + NULL AS pn, + ts AS pt FROM t1

# --- The function library, LIKE ESCAPE, and more of the forms above -----------------
# SQLite lacks lpad, rpad, left, right, repeat, starts_with, ascii, chr, date_part and to_char: the
# same values from substr, ||, unicode, char and strftime.
fn_like_escape: SELECT id, s LIKE 'a#%' ESCAPE '#' AS a, s LIKE '%!_%' ESCAPE '!' AS b, s NOT LIKE 'ap%' ESCAPE 'p' AS c FROM t1
fn_left_right: SELECT id, left(s, 2) AS l, right(s, 3) AS r FROM t1
sqlite: SELECT id, substr(s, 1, 2), CASE WHEN length(s) >= 3 THEN substr(s, length(s) - 2) ELSE s END FROM t1
fn_pad: SELECT id, lpad(s, 8, '*') AS l, rpad(s, 6, '-') AS r FROM t1
sqlite: SELECT id, CASE WHEN length(s) >= 8 THEN substr(s, 1, 8) ELSE substr('********', 1, 8 - length(s)) || s END, CASE WHEN length(s) >= 6 THEN substr(s, 1, 6) ELSE s || substr('------', 1, 6 - length(s)) END FROM t1
fn_repeat_starts: SELECT id, repeat(s, 2) AS rr, starts_with(s, 'a') AS sa FROM t1
sqlite: SELECT id, s || s, substr(s, 1, 1) = 'a' FROM t1
fn_ascii_chr: SELECT id, ascii(s) AS a, chr(a + 64) AS c FROM t1 WHERE a BETWEEN 1 AND 26
sqlite: SELECT id, CASE WHEN s = '' THEN 0 ELSE unicode(s) END, char(a + 64) FROM t1 WHERE a BETWEEN 1 AND 26
fn_power_trunc: SELECT id, power(a, 2) AS p, power(c, 2) AS pc, trunc(c) AS tc, mod(a, 7) AS m FROM t1
sqlite: SELECT id, a * a, c * c, CAST(c AS INTEGER), a % 7 FROM t1
fn_date_part: SELECT id, date_part('year', ts) AS y, date_part('hour', ts) AS h, date_part('dow', ts) AS dw FROM t1
sqlite: SELECT id, CAST(strftime('%Y', ts) AS REAL), CAST(strftime('%H', ts) AS REAL), CAST(strftime('%w', ts) AS REAL) FROM t1
fn_to_char: SELECT id, to_char(ts, 'YYYY-MM-DD HH24:MI') AS a, to_char(ts, 'DD/MM/YY') AS b FROM t1
sqlite: SELECT id, strftime('%Y-%m-%d %H:%M', ts), strftime('%d/%m/', ts) || substr(strftime('%Y', ts), 3) FROM t1
win_partition_nulls: SELECT id, b, RANK() OVER (PARTITION BY b ORDER BY a) AS r FROM t1
win_dense_desc_nulls: SELECT id, DENSE_RANK() OVER (ORDER BY c DESC NULLS LAST) AS d FROM t1
win_sum_double_running: SELECT id, SUM(c) OVER (ORDER BY id) AS sc, MIN(c) OVER (ORDER BY id) AS mc FROM t1
win_lead_default_column: SELECT id, LEAD(b, 1, a) OVER (PARTITION BY s ORDER BY id) AS nb FROM t1
win_over_grouped: SELECT s, n, RANK() OVER (ORDER BY n DESC) AS r FROM (SELECT s, COUNT(*) AS n FROM t1 GROUP BY s) q
win_over_join: SELECT t2.k, t3.name, SUM(t2.x) OVER (PARTITION BY t3.name) AS total FROM t2 JOIN t3 ON t2.k = t3.k
win_dense_top: SELECT id, s, dr FROM (SELECT id, s, DENSE_RANK() OVER (PARTITION BY s ORDER BY a DESC) AS dr FROM t1) q WHERE dr = 1
intersect_all_nulls: SELECT a, b FROM t1 INTERSECT ALL SELECT a, b FROM t1 WHERE c > 0
sqlite: SELECT a, b FROM (SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a, b) FROM t1 INTERSECT SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a, b) FROM t1 WHERE c > 0)
except_counted: SELECT COUNT(*) AS n FROM (SELECT k FROM t2 EXCEPT SELECT k FROM u) q
union_all_except: SELECT k FROM t2 UNION ALL SELECT k FROM t3 EXCEPT SELECT k FROM u
all_where_correlated: SELECT id FROM t1 WHERE a > ALL (SELECT x FROM t2 WHERE t2.k = t1.b)
sqlite: SELECT id FROM t1 WHERE (SELECT CASE WHEN SUM(NOT (t1.a > x)) > 0 THEN 0 WHEN SUM((t1.a > x) IS NULL) > 0 THEN NULL ELSE 1 END FROM t2 WHERE t2.k = t1.b)
using_left_unmatched: SELECT k, name FROM t3 LEFT JOIN t2 USING (k) WHERE x IS NULL
natural_self: SELECT COUNT(*) AS n FROM t3 NATURAL JOIN t3 AS t
join_left_across_nulls: SELECT t1.id, t2.y FROM t1 LEFT JOIN t2 ON t1.b = t2.k AND t2.y <> t1.s
join_full_theta: SELECT t3.k, t4.a FROM t3 FULL JOIN t4 ON t3.w < t4.a
join_right_preserved_filter: SELECT t3.k, t2.x FROM t3 RIGHT JOIN t2 ON t3.k = t2.k AND t2.x > 50
var_e: SELECT cat, VAR_POP(amount) AS v FROM e GROUP BY cat
sqlite: SELECT cat, MAX((1.0 * SUM(amount * amount) - 1.0 * SUM(amount) * SUM(amount) / COUNT(amount)) / COUNT(amount), 0) FROM e GROUP BY cat
var_having: SELECT s FROM t1 GROUP BY s HAVING VAR_POP(a) > 100
sqlite: SELECT s FROM t1 GROUP BY s HAVING MAX((1.0 * SUM(a * a) - 1.0 * SUM(a) * SUM(a) / COUNT(a)) / COUNT(a), 0) > 100
except_correlated_exists: SELECT k FROM t3 WHERE EXISTS (SELECT x FROM t2 WHERE t2.k = t3.k EXCEPT SELECT a FROM t1)
any_text_in_where: SELECT k FROM t2 WHERE y = ANY (SELECT s FROM t1 WHERE a > 10)
sqlite: SELECT k FROM t2 WHERE y IN (SELECT s FROM t1 WHERE a > 10)
win_cume_dist_dups: SELECT k, x, CUME_DIST() OVER (ORDER BY x) AS cd, PERCENT_RANK() OVER (PARTITION BY k ORDER BY x) AS pr FROM t2
win_count_following: SELECT id, COUNT(b) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING) AS n FROM t1
intersect_in_cte: WITH x AS (SELECT k FROM t2 INTERSECT SELECT k FROM t3) SELECT k FROM x
fn_nested: SELECT id, upper(left(s, 1)) || lower(substr(s, 2)) AS cap FROM t1
sqlite: SELECT id, upper(substr(s, 1, 1)) || lower(substr(s, 2)) FROM t1
sub_exists_and_window: SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM t1 WHERE EXISTS (SELECT 1 FROM t3 WHERE t3.k = t1.b)
sub_scalar_max_corr_e: SELECT k, (SELECT MAX(amount) FROM e WHERE e.k = u.k) AS m FROM u
sub_exists_t2_u: SELECT k, x FROM t2 WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t2.k AND u.v > t2.x)
sub_not_exists_e: SELECT k FROM t3 WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.k = t3.k)
sub_in_u: SELECT id FROM e WHERE k IN (SELECT k FROM u WHERE v > 10)
sub_not_in_u: SELECT id FROM t1 WHERE a NOT IN (SELECT v FROM u)
sub_scalar_count_t2: SELECT id, (SELECT COUNT(*) FROM t2 WHERE t2.x < t1.a) AS n FROM t1
sub_scalar_in_case_when: SELECT id, CASE WHEN a > (SELECT AVG(x) FROM t2) THEN 'hi' ELSE 'lo' END AS band FROM t1
sub_in_expr_operand: SELECT id FROM t1 WHERE a + 1 IN (SELECT x FROM t2)
sub_exists_distinct: SELECT DISTINCT s FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.k = t1.id)
sub_scalar_min_text: SELECT k, (SELECT MIN(s) FROM t1 WHERE t1.b = t3.k) AS first_s FROM t3
sub_scalar_u_t3: SELECT k, (SELECT MAX(name) FROM t3 WHERE t3.k = u.k) AS name FROM u
sub_in_e_t2: SELECT id FROM e WHERE amount IN (SELECT x FROM t2)
sub_exists_u_e: SELECT k FROM u WHERE EXISTS (SELECT 1 FROM e WHERE e.k = u.k)
any_gt_e: SELECT k FROM t3 WHERE w > ANY (SELECT amount FROM e WHERE e.k = t3.k)
sqlite: SELECT k FROM t3 WHERE (SELECT CASE WHEN SUM(t3.w > amount) > 0 THEN 1 WHEN SUM((t3.w > amount) IS NULL) > 0 THEN NULL ELSE 0 END FROM e WHERE e.k = t3.k)
all_le_t2: SELECT id, a <= ALL (SELECT x FROM t2 WHERE x IS NOT NULL) AS p FROM t1
sqlite: SELECT id, (SELECT CASE WHEN SUM(NOT (t1.a <= x)) > 0 THEN 0 WHEN SUM((t1.a <= x) IS NULL) > 0 THEN NULL ELSE 1 END FROM t2 WHERE x IS NOT NULL) FROM t1
any_eq_u: SELECT id, b = ANY (SELECT v FROM u) AS p FROM t1
sqlite: SELECT id, b IN (SELECT v FROM u) FROM t1
all_ne_e: SELECT k, w <> ALL (SELECT amount FROM e) AS p FROM t3
sqlite: SELECT k, w NOT IN (SELECT amount FROM e) FROM t3
any_lt_u: SELECT k, v < ANY (SELECT w FROM t3) AS p FROM u
sqlite: SELECT k, (SELECT CASE WHEN SUM(u.v < w) > 0 THEN 1 WHEN SUM((u.v < w) IS NULL) > 0 THEN NULL ELSE 0 END FROM t3) FROM u
all_ge_t3: SELECT id, a >= ALL (SELECT w FROM t3) AS p FROM t1
sqlite: SELECT id, (SELECT CASE WHEN SUM(NOT (t1.a >= w)) > 0 THEN 0 WHEN SUM((t1.a >= w) IS NULL) > 0 THEN NULL ELSE 1 END FROM t3) FROM t1
intersect_e_u: SELECT k FROM e INTERSECT SELECT k FROM u
except_u_e: SELECT k, v FROM u EXCEPT SELECT k, amount FROM e
except_all_t2_t2: SELECT k, y FROM t2 EXCEPT ALL SELECT k, y FROM t2 WHERE x < 30
sqlite: SELECT k, y FROM (SELECT k, y, ROW_NUMBER() OVER (PARTITION BY k, y) FROM t2 EXCEPT SELECT k, y, ROW_NUMBER() OVER (PARTITION BY k, y) FROM t2 WHERE x < 30)
intersect_all_e_t1: SELECT cat FROM e INTERSECT ALL SELECT s FROM t1
sqlite: SELECT cat FROM (SELECT cat, ROW_NUMBER() OVER (PARTITION BY cat) FROM e INTERSECT SELECT s, ROW_NUMBER() OVER (PARTITION BY s) FROM t1)
intersect_text_nulls: SELECT s FROM t1 INTERSECT SELECT y FROM t2
except_grouped: SELECT k, COUNT(*) AS n FROM t2 GROUP BY k EXCEPT SELECT k, 1 FROM t3
intersect_u_t3: SELECT k FROM u INTERSECT SELECT k FROM t3
except_t3_u: SELECT k FROM t3 EXCEPT SELECT k FROM u
except_all_e_t2: SELECT k FROM e EXCEPT ALL SELECT k FROM t2
sqlite: SELECT k FROM (SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM e EXCEPT SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM t2)
intersect_all_u_t2: SELECT k FROM u INTERSECT ALL SELECT k FROM t2
sqlite: SELECT k FROM (SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM u INTERSECT SELECT k, ROW_NUMBER() OVER (PARTITION BY k) FROM t2)
win_e_running_count: SELECT cat, ts, COUNT(*) OVER (PARTITION BY cat ORDER BY ts) AS n FROM e
win_u_sum: SELECT k, v, SUM(v) OVER (ORDER BY k) AS s FROM u
win_t2_lag_partition: SELECT k, x, LAG(x) OVER (PARTITION BY k ORDER BY x) AS px FROM t2
win_avg_range_t2: SELECT k, x, AVG(x) OVER (PARTITION BY k ORDER BY x RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS a FROM t2
win_max_whole: SELECT id, MAX(a) OVER () AS mx, MIN(b) OVER () AS mn FROM t1
win_rank_text: SELECT id, s, RANK() OVER (ORDER BY s) AS r FROM t1
win_ntile_nulls: SELECT id, NTILE(2) OVER (PARTITION BY b IS NULL ORDER BY id) AS h FROM t1
win_first_value_partition: SELECT id, s, FIRST_VALUE(a) OVER (PARTITION BY s ORDER BY id) AS fa FROM t1
win_last_value_peers: SELECT id, LAST_VALUE(a) OVER (ORDER BY a) AS la FROM t1
win_nth_value_whole: SELECT id, NTH_VALUE(b, 3) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS third FROM t1
win_sum_decimal: SELECT id, SUM(d) OVER (PARTITION BY s ORDER BY id) AS sd FROM t1
win_expr_partition: SELECT id, RANK() OVER (PARTITION BY a % 3 ORDER BY b DESC NULLS LAST) AS r FROM t1
win_two_orders: SELECT id, ROW_NUMBER() OVER (PARTITION BY s ORDER BY id) AS r1, ROW_NUMBER() OVER (ORDER BY id DESC) AS r2 FROM t1
win_lag_offsets: SELECT id, LAG(a, 3) OVER (ORDER BY id) AS l3, LEAD(a, 0) OVER (ORDER BY id) AS l0 FROM t1
win_rank_u: SELECT k, RANK() OVER (ORDER BY v) AS r FROM u
win_dense_e: SELECT cat, DENSE_RANK() OVER (ORDER BY cat) AS d FROM e
win_cume_t1: SELECT id, CUME_DIST() OVER (PARTITION BY s ORDER BY a) AS c FROM t1
win_percent_u: SELECT k, PERCENT_RANK() OVER (ORDER BY v DESC) AS p FROM u
win_sum_frame_u: SELECT k, SUM(v) OVER (ORDER BY k ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s FROM u
win_avg_t3: SELECT k, AVG(w) OVER (ORDER BY k ROWS 2 PRECEDING) AS a FROM t3
win_min_max_e: SELECT id, cat, MIN(amount) OVER (PARTITION BY cat) AS lo, MAX(amount) OVER (PARTITION BY cat) AS hi FROM e
win_count_t2_partition: SELECT k, COUNT(*) OVER (PARTITION BY k) AS n, COUNT(y) OVER (PARTITION BY k) AS ny FROM t2
win_lag_text_u: SELECT k, LAG(w, 1, '-') OVER (ORDER BY k) AS pw FROM u
win_lead_t3: SELECT k, LEAD(name) OVER (ORDER BY k) AS next FROM t3
using_u_e: SELECT k, v, amount FROM u JOIN e USING (k)
using_three_left: SELECT k, name, x, v FROM t3 LEFT JOIN t2 USING (k) LEFT JOIN u USING (k)
natural_t2_t3_left: SELECT k, x, name FROM t2 NATURAL LEFT JOIN t3
using_e_t3: SELECT k, name, amount FROM e JOIN t3 USING (k)
natural_u_sub: SELECT * FROM u NATURAL JOIN (SELECT k, name FROM t3) q
join_left_across_e: SELECT t3.k, e.amount FROM t3 LEFT JOIN e ON t3.k = e.k AND e.amount > t3.w
join_full_across_u: SELECT t3.k AS a, u.k AS b, u.v FROM t3 FULL JOIN u ON t3.k = u.k AND u.v < t3.w
join_left_not_equal: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t3.k <> t2.k AND t2.x = t3.w
join_right_theta: SELECT t4.a, t3.k FROM t3 RIGHT JOIN t4 ON t3.w > t4.a
join_left_across_u: SELECT t1.id, u.v FROM t1 LEFT JOIN u ON t1.b = u.k AND u.v > t1.a
agg_variance_t2: SELECT k, VARIANCE(x) AS v FROM t2 GROUP BY k
sqlite: SELECT k, MAX((1.0 * SUM(x * x) - 1.0 * SUM(x) * SUM(x) / COUNT(x)) / (COUNT(x) - 1.0), 0) FROM t2 GROUP BY k
agg_stddev_global_e: SELECT STDDEV_POP(amount) * STDDEV_POP(amount) AS v2 FROM e
sqlite: SELECT MAX((1.0 * SUM(amount * amount) - 1.0 * SUM(amount) * SUM(amount) / COUNT(amount)) / COUNT(amount), 0) FROM e
fn_like_escape_where: SELECT id FROM t1 WHERE s LIKE '%#_%' ESCAPE '#' OR s LIKE 'b%'
fn_pad_numbers: SELECT id, lpad(CAST(a AS TEXT), 4, '0') AS padded FROM t1
sqlite: SELECT id, CASE WHEN length(CAST(a AS TEXT)) >= 4 THEN substr(CAST(a AS TEXT), 1, 4) ELSE substr('0000', 1, 4 - length(CAST(a AS TEXT))) || CAST(a AS TEXT) END FROM t1
fn_date_part_e: SELECT id, date_part('minute', ts) AS m FROM e
sqlite: SELECT id, CAST(strftime('%M', ts) AS REAL) FROM e
fn_to_char_e: SELECT id, to_char(ts, 'HH24:MI:SS') AS t FROM e
sqlite: SELECT id, strftime('%H:%M:%S', ts) FROM e
dup_names_self_join_star: SELECT * FROM t3 JOIN t3 AS other ON t3.k = other.k
fn_reverse_twice: SELECT id, reverse(reverse(s)) AS same FROM t1
sqlite: SELECT id, s FROM t1
fn_initcap_lower: SELECT id, lower(initcap(s)) AS l FROM t1
sqlite: SELECT id, lower(s) FROM t1
fn_chr_ascii: SELECT id, chr(ascii(s)) AS c FROM t1 WHERE s <> ''
sqlite: SELECT id, substr(s, 1, 1) FROM t1 WHERE s <> ''
fn_sign_decimal: SELECT id, sign(d) AS sd FROM t1
sqlite: SELECT id, CASE WHEN d > 0 THEN 1 WHEN d < 0 THEN -1 WHEN d = 0 THEN 0 END FROM t1
fn_power_sqrt: SELECT id, sqrt(power(a, 2)) AS r FROM t1
sqlite: SELECT id, abs(a) FROM t1
fn_ln_exp: SELECT id, ln(exp(b / 100.0)) AS x FROM t1
sqlite: SELECT id, b / 100.0 FROM t1
fn_log10_back: SELECT id, power(10, log10(a)) AS back FROM t1 WHERE a > 0
sqlite: SELECT id, a FROM t1 WHERE a > 0

# --- string_agg with ORDER BY, COUNT(DISTINCT a, b) ------------------------------------
# (ORDER BY keys are unique, or ties have equal values: SQLite orders ties as it likes.)
sagg_order_desc: SELECT k, string_agg(y, ',' ORDER BY y DESC) AS ys FROM t2 GROUP BY k
sagg_order_other_key: SELECT s, string_agg(CAST(id AS TEXT), '|' ORDER BY a DESC NULLS LAST, id) AS ids FROM t1 GROUP BY s
sagg_order_global: SELECT string_agg(s, ';' ORDER BY id DESC) AS ss, COUNT(*) AS n FROM t1
sagg_order_expr: SELECT a % 4 AS r, string_agg(CAST(id AS TEXT), ',' ORDER BY c * b, id) AS ids FROM t1 GROUP BY a % 4
sagg_order_empty: SELECT string_agg(CAST(a AS TEXT), ',' ORDER BY b) AS xs FROM t0
sagg_order_changing: SELECT string_agg(b, '+' ORDER BY a DESC, b) AS bs FROM t4
sagg_order_filter: SELECT s, string_agg(CAST(b AS TEXT), '-' ORDER BY b DESC, id) FILTER (WHERE a > 20) AS bs, COUNT(*) AS n FROM t1 GROUP BY s
sagg_order_upsert: SELECT w, string_agg(CAST(v AS TEXT), ',' ORDER BY k DESC) AS vs FROM u GROUP BY w
sagg_order_append_only: SELECT k, string_agg(cat, '' ORDER BY amount DESC, cat) AS cats FROM e GROUP BY k
sagg_order_two_orders: SELECT k, string_agg(y, ',' ORDER BY y) AS up, string_agg(y, ',' ORDER BY y DESC) AS down, string_agg(y, ',') AS plain FROM t2 GROUP BY k
sqlite: SELECT k, string_agg(y, ',' ORDER BY y), string_agg(y, ',' ORDER BY y DESC), string_agg(y, ',' ORDER BY y) FROM t2 GROUP BY k
# SQLite: DISTINCT aggregates take one argument, so group_concat (separator ',').
sagg_distinct_order: SELECT k, string_agg(DISTINCT y, ',' ORDER BY y DESC) AS ys FROM t2 GROUP BY k
sqlite: SELECT k, group_concat(DISTINCT y ORDER BY y DESC) FROM t2 GROUP BY k
sagg_distinct_order_global: SELECT string_agg(DISTINCT s, ',' ORDER BY s) AS ss, string_agg(DISTINCT cat, ',' ORDER BY cat DESC) FILTER (WHERE ok) AS c FROM t1, (SELECT DISTINCT cat, ok FROM e) q WHERE t1.a % 7 = 1
sqlite: SELECT group_concat(DISTINCT s ORDER BY s), group_concat(DISTINCT cat ORDER BY cat DESC) FILTER (WHERE ok) FROM t1, (SELECT DISTINCT cat, ok FROM e) q WHERE t1.a % 7 = 1
sagg_order_having: SELECT k, string_agg(y, ',' ORDER BY x, y) AS ys FROM t2 GROUP BY k HAVING COUNT(*) > 1
# ours: COUNT(DISTINCT a, b) counts the distinct tuples with no NULL member (MySQL's); SQLite has no such form.
count_distinct_pair: SELECT k, COUNT(DISTINCT x, y) AS pairs, COUNT(DISTINCT y) AS ys FROM t2 GROUP BY k
sqlite: SELECT k, (SELECT COUNT(*) FROM (SELECT DISTINCT i.x, i.y FROM t2 AS i WHERE i.k IS o.k AND i.x IS NOT NULL AND i.y IS NOT NULL)), COUNT(DISTINCT y) FROM t2 AS o GROUP BY k
count_distinct_triple_global: SELECT COUNT(DISTINCT a, b, s) AS n, COUNT(DISTINCT a) AS na FROM t1
sqlite: SELECT (SELECT COUNT(*) FROM (SELECT DISTINCT a, b, s FROM t1 WHERE a IS NOT NULL AND b IS NOT NULL AND s IS NOT NULL)), COUNT(DISTINCT a) FROM t1
count_distinct_pair_empty: SELECT COUNT(DISTINCT a, b) AS n FROM t0
sqlite: SELECT 0
count_distinct_pair_append_only: SELECT k, COUNT(DISTINCT cat, ok) AS n FROM e GROUP BY k
sqlite: SELECT k, (SELECT COUNT(*) FROM (SELECT DISTINCT i.cat, i.ok FROM e AS i WHERE i.k IS o.k AND i.cat IS NOT NULL AND i.ok IS NOT NULL)) FROM e AS o GROUP BY k
count_distinct_pair_upsert: SELECT COUNT(DISTINCT v % 3, w) AS n, COUNT(DISTINCT w) AS nw FROM u
sqlite: SELECT (SELECT COUNT(*) FROM (SELECT DISTINCT v % 3, w FROM u WHERE v IS NOT NULL AND w IS NOT NULL)), COUNT(DISTINCT w) FROM u
count_distinct_pair_filter: SELECT s, COUNT(DISTINCT a % 5, b % 3) FILTER (WHERE id % 2 = 0) AS n FROM t1 GROUP BY s
sqlite: SELECT s, (SELECT COUNT(*) FROM (SELECT DISTINCT i.a % 5, i.b % 3 FROM t1 AS i WHERE i.s IS o.s AND i.id % 2 = 0 AND i.a IS NOT NULL AND i.b IS NOT NULL)) FROM t1 AS o GROUP BY s

# --- Subqueries in HAVING, in aggregated SELECT items, in JOIN ... ON -----------------------
subq_having_scalar: SELECT k, SUM(x) AS s FROM t2 GROUP BY k HAVING SUM(x) > (SELECT AVG(a) FROM t1)
subq_having_correlated: SELECT k, COUNT(*) AS n FROM t2 GROUP BY k HAVING COUNT(*) >= (SELECT COUNT(*) FROM t3 WHERE t3.k = t2.k)
subq_having_exists: SELECT s, MAX(a) AS m FROM t1 GROUP BY s HAVING EXISTS (SELECT 1 FROM t2 WHERE t2.y = t1.s)
subq_having_in: SELECT k, SUM(x) AS s FROM t2 GROUP BY k HAVING k IN (SELECT k FROM t3 WHERE w > 10)
subq_having_not_in_nulls: SELECT k, MAX(x) AS m FROM t2 GROUP BY k HAVING MAX(x) NOT IN (SELECT b FROM t1)
subq_having_agg_in: SELECT k, MAX(x) AS m FROM t2 GROUP BY k HAVING MAX(x) IN (SELECT a FROM t1 WHERE a > 20)
subq_having_u: SELECT w, SUM(v) AS s FROM u GROUP BY w HAVING SUM(v) > (SELECT AVG(v) FROM u)
subq_having_e_theta: SELECT cat, COUNT(*) AS n FROM e GROUP BY cat HAVING COUNT(*) > (SELECT COUNT(*) FROM e AS i WHERE i.cat < e.cat)
subq_having_nested: SELECT k, COUNT(*) AS n FROM t2 GROUP BY k HAVING EXISTS (SELECT 1 FROM t3 WHERE t3.w > (SELECT MIN(x) FROM t2 AS i WHERE i.k = t2.k))
subq_having_global: SELECT COUNT(*) AS n FROM t4 HAVING COUNT(*) < (SELECT COUNT(*) FROM t3)
subq_agg_item_scalar: SELECT k, SUM(x) + (SELECT MAX(w) FROM t3) AS s FROM t2 GROUP BY k
subq_agg_item_correlated: SELECT k, COUNT(*) AS n, (SELECT MAX(name) FROM t3 WHERE t3.k = t2.k) AS name FROM t2 GROUP BY k
subq_agg_item_exists: SELECT s, COUNT(*) AS n, EXISTS (SELECT 1 FROM t2 WHERE t2.y = t1.s) AS seen FROM t1 GROUP BY s
subq_agg_item_global: SELECT COUNT(*) AS n, (SELECT COUNT(*) FROM t3) AS m, SUM(a) - (SELECT SUM(w) FROM t3) AS d FROM t1
subq_agg_item_in_case: SELECT k, CASE WHEN k IN (SELECT k FROM u) THEN SUM(x) ELSE -1 END AS s FROM t2 GROUP BY k
subq_agg_item_two_keys: SELECT k, y, COUNT(*) AS n, (SELECT COUNT(*) FROM t1 WHERE t1.s = t2.y AND t1.a > t2.k) AS m FROM t2 GROUP BY k, y
subq_agg_item_append_only: SELECT cat, SUM(amount) AS s, (SELECT MAX(w) FROM t3 WHERE t3.name = e.cat) AS w FROM e GROUP BY cat
subq_on_scalar: SELECT t2.k, t2.x, t3.name FROM t2 JOIN t3 ON t2.k = t3.k AND t2.x > (SELECT AVG(x) FROM t2)
subq_on_correlated: SELECT t2.k, t2.x, t3.w FROM t2 JOIN t3 ON t2.k = t3.k AND t2.x >= (SELECT MAX(a) FROM t1 WHERE t1.b = t3.w)
subq_on_left_exists: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t2.k = t3.k AND EXISTS (SELECT 1 FROM t1 WHERE t1.a = t2.x)
subq_on_left_preserved: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t2.k = t3.k AND t3.w IN (SELECT b FROM t1)
subq_on_full: SELECT t3.k AS a, u.k AS b FROM t3 FULL JOIN u ON t3.k = u.k AND u.v < (SELECT MAX(w) FROM t3)
subq_on_right_not_in: SELECT t1.id, t3.k FROM t1 RIGHT JOIN t3 ON t1.a = t3.k AND t1.b NOT IN (SELECT x FROM t2 WHERE x IS NOT NULL)
subq_on_no_key: SELECT t4.a, t3.k FROM t4 JOIN t3 ON t3.w > (SELECT COUNT(*) FROM t2 WHERE t2.k = t4.a)
subq_on_key_side: SELECT t1.id, t3.k FROM t1 JOIN t3 ON t3.k = (SELECT MIN(k) FROM t2 WHERE t2.x = t1.a)

# --- Window functions over aggregated queries (after GROUP BY and HAVING) --------------------
win_grouped_rank: SELECT k, SUM(x) AS s, RANK() OVER (ORDER BY SUM(x) DESC) AS r FROM t2 GROUP BY k
win_grouped_partition: SELECT s, a % 3 AS m, COUNT(*) AS n, DENSE_RANK() OVER (PARTITION BY s ORDER BY COUNT(*)) AS dr FROM t1 GROUP BY s, a % 3
win_grouped_running: SELECT k, COUNT(*) AS n, SUM(COUNT(*)) OVER (ORDER BY k) AS running FROM t2 GROUP BY k
win_grouped_share: SELECT cat, SUM(amount) AS s, CAST(SUM(amount) AS DOUBLE) / SUM(SUM(amount)) OVER () AS share FROM e GROUP BY cat
win_grouped_lag: SELECT k, MAX(x) AS m, LAG(MAX(x)) OVER (ORDER BY k) AS prev, MAX(x) - LEAD(MIN(x), 1, 0) OVER (ORDER BY k) AS d FROM t2 GROUP BY k
win_grouped_row_number: SELECT w, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC, w) AS rn FROM u GROUP BY w
win_grouped_having: SELECT k, SUM(x) AS s, RANK() OVER (ORDER BY SUM(x)) AS r FROM t2 GROUP BY k HAVING COUNT(*) > 1
win_grouped_global: SELECT COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*)) AS r FROM t1
win_grouped_filtered_outer: SELECT k, s FROM (SELECT k, SUM(x) AS s, RANK() OVER (ORDER BY SUM(x) DESC) AS r FROM t2 GROUP BY k) q WHERE r <= 3
win_grouped_append_only: SELECT cat, COUNT(*) AS n, NTILE(2) OVER (ORDER BY cat) AS half, FIRST_VALUE(cat) OVER (ORDER BY COUNT(*) DESC, cat) AS top FROM e GROUP BY cat
win_grouped_frame: SELECT s, SUM(a) AS t, AVG(SUM(a)) OVER (ORDER BY s ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS smooth FROM t1 GROUP BY s
win_grouped_rows_and_groups: SELECT y, COUNT(*) AS n, COUNT(*) OVER () AS groups, MAX(COUNT(*)) OVER () AS most FROM t2 GROUP BY y
win_grouped_subquery_item: SELECT k, SUM(x) AS s, RANK() OVER (ORDER BY SUM(x)) AS r, (SELECT COUNT(*) FROM t3 WHERE t3.k = t2.k) AS m FROM t2 GROUP BY k

# --- RANGE frames with offsets (over one ORDER BY key; NULL keys are peers of NULLs only) ---
win_range_offset: SELECT id, a, SUM(b) OVER (ORDER BY a RANGE BETWEEN 10 PRECEDING AND CURRENT ROW) AS s FROM t1
win_range_offset_following: SELECT id, a, COUNT(*) OVER (ORDER BY a RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING) AS n, MAX(b) OVER (ORDER BY a RANGE BETWEEN CURRENT ROW AND 20 FOLLOWING) AS mx FROM t1
win_range_offset_desc: SELECT id, b, SUM(a) OVER (ORDER BY b DESC RANGE BETWEEN 15 PRECEDING AND 3 FOLLOWING) AS s FROM t1
win_range_offset_nulls_last: SELECT id, a, COUNT(*) OVER (ORDER BY a NULLS LAST RANGE BETWEEN 7 PRECEDING AND 7 FOLLOWING) AS n FROM t1
win_range_offset_partition: SELECT k, x, COUNT(*) OVER (PARTITION BY k ORDER BY x RANGE BETWEEN 10 PRECEDING AND 10 FOLLOWING) AS n FROM t2
win_range_offset_double: SELECT id, c, COUNT(*) OVER (ORDER BY c RANGE BETWEEN 0.5 PRECEDING AND 0.5 FOLLOWING) AS n FROM t1
win_range_offset_decimal: SELECT id, d, SUM(a) OVER (ORDER BY d RANGE BETWEEN 2.5 PRECEDING AND CURRENT ROW) AS s FROM t1
win_range_offset_preceding_only: SELECT id, a, COUNT(*) OVER (ORDER BY a RANGE BETWEEN 20 PRECEDING AND 5 PRECEDING) AS n, SUM(b) OVER (ORDER BY a RANGE BETWEEN 5 FOLLOWING AND UNBOUNDED FOLLOWING) AS rest FROM t1
win_range_offset_append_only: SELECT id, amount, COUNT(*) OVER (PARTITION BY cat ORDER BY amount RANGE BETWEEN 3 PRECEDING AND 3 FOLLOWING) AS n FROM e
win_range_offset_u: SELECT k, v, COUNT(*) OVER (ORDER BY v RANGE 10 PRECEDING) AS n, FIRST_VALUE(k) OVER (ORDER BY v RANGE BETWEEN 10 PRECEDING AND CURRENT ROW) AS f FROM u

# --- Table functions in FROM, LATERAL (SQLite has none: joins with nums, 0..99) ---
series_alone: SELECT g, g * g AS sq FROM generate_series(1, 5) AS g
sqlite: SELECT i, i * i FROM nums WHERE i BETWEEN 1 AND 5
series_step_down: SELECT x FROM generate_series(20, 3, -4) AS s(x)
sqlite: SELECT 20 - 4 * i FROM nums WHERE 20 - 4 * i >= 3
series_cross: SELECT k, g FROM t3, generate_series(1, 2) AS g
sqlite: SELECT k, i FROM t3 JOIN nums ON i BETWEEN 1 AND 2
lateral_series: SELECT id, g FROM t1, generate_series(1, a % 5) AS g
sqlite: SELECT id, i FROM t1 JOIN nums ON i BETWEEN 1 AND a % 5
lateral_series_step: SELECT id, g FROM t1 CROSS JOIN LATERAL generate_series(b % 7, 10, 3) AS g
sqlite: SELECT id, b % 7 + 3 * i FROM t1 JOIN nums ON b % 7 + 3 * i <= 10
lateral_series_left: SELECT id, b, g FROM t1 LEFT JOIN LATERAL generate_series(1, b % 3) AS g ON TRUE
sqlite: SELECT id, b, i FROM t1 LEFT JOIN nums ON i BETWEEN 1 AND b % 3
lateral_series_left_on: SELECT id, b, g FROM t1 LEFT JOIN LATERAL generate_series(1, b % 4) AS g ON g > a % 3
sqlite: SELECT id, b, i FROM t1 LEFT JOIN nums ON i BETWEEN 1 AND b % 4 AND i > a % 3
lateral_unnest_left_on: SELECT id, v FROM t1 LEFT JOIN LATERAL unnest('{' || a || ',' || b || '}') AS v ON v > '5'
sqlite: SELECT id, v FROM t1 LEFT JOIN (SELECT id AS i, CAST(a AS TEXT) AS v FROM t1 WHERE a IS NOT NULL AND b IS NOT NULL UNION ALL SELECT id, CAST(b AS TEXT) FROM t1 WHERE a IS NOT NULL AND b IS NOT NULL) u ON u.i = t1.id AND u.v > '5'
lateral_series_on: SELECT id, g FROM t1 JOIN generate_series(1, 4) AS g ON g <= b % 5 AND g > a % 3
sqlite: SELECT id, i FROM t1 JOIN nums ON i BETWEEN 1 AND 4 AND i <= b % 5 AND i > a % 3
lateral_series_aggregate: SELECT a % 4 AS m, SUM(s.x) AS total, COUNT(*) AS n FROM t1, generate_series(1, b % 4) AS s(x) GROUP BY a % 4
sqlite: SELECT a % 4, SUM(i), COUNT(*) FROM t1 JOIN nums ON i BETWEEN 1 AND b % 4 GROUP BY a % 4
lateral_series_two: SELECT t2.k, g, h FROM t2, generate_series(1, t2.x % 3) AS g, generate_series(g, 3) AS h
sqlite: SELECT t2.k, g.i, h.i FROM t2 JOIN nums g ON g.i BETWEEN 1 AND t2.x % 3 JOIN nums h ON h.i BETWEEN g.i AND 3
lateral_series_join_after: SELECT t1.id, g, t3.name FROM t1 JOIN t3 ON t3.k = t1.a CROSS JOIN LATERAL generate_series(t3.w % 3, 2) AS g
sqlite: SELECT t1.id, i, t3.name FROM t1 JOIN t3 ON t3.k = t1.a JOIN nums ON i BETWEEN t3.w % 3 AND 2
lateral_series_source: SELECT id, g FROM e, generate_series(1, k % 3) AS g WHERE amount > 5
sqlite: SELECT id, i FROM e JOIN nums ON i BETWEEN 1 AND k % 3 WHERE amount > 5
lateral_series_upsert: SELECT u.k, g FROM u LEFT JOIN LATERAL generate_series(v % 4, 1) AS g ON TRUE
sqlite: SELECT u.k, v % 4 + i FROM u LEFT JOIN nums ON v % 4 + i <= 1
lateral_series_subquery: SELECT id, (SELECT SUM(g) FROM generate_series(1, t1.a % 6) AS g) AS tri FROM t1
sqlite: SELECT id, (SELECT SUM(i) FROM nums WHERE i BETWEEN 1 AND t1.a % 6) FROM t1
lateral_series_exists: SELECT k FROM t3 WHERE EXISTS (SELECT 1 FROM generate_series(1, t3.w % 4) AS g WHERE g = 2)
sqlite: SELECT k FROM t3 WHERE t3.w % 4 >= 2
lateral_unnest: SELECT id, v FROM t1, unnest('{' || a || ',' || b || '}') AS v
sqlite: SELECT id, CAST(a AS TEXT) FROM t1 WHERE a IS NOT NULL AND b IS NOT NULL UNION ALL SELECT id, CAST(b AS TEXT) FROM t1 WHERE a IS NOT NULL AND b IS NOT NULL
lateral_unnest_left: SELECT k, v FROM t3 LEFT JOIN LATERAL unnest(CASE WHEN w % 2 = 0 THEN '{p,NULL,q}' END) AS v ON TRUE
sqlite: SELECT k, v FROM t3 JOIN (SELECT 'p' AS v UNION ALL SELECT NULL UNION ALL SELECT 'q') ON w % 2 = 0 UNION ALL SELECT k, NULL FROM t3 WHERE w % 2 <> 0 OR w IS NULL

# --- array_agg: the array's text form as TEXT (SQLite: string_agg of each element's text form) ---
aagg_ints: SELECT k, array_agg(x ORDER BY x DESC NULLS LAST, y) AS xs FROM t2 GROUP BY k
sqlite: SELECT k, '{' || string_agg(COALESCE(CAST(x AS TEXT), 'NULL'), ',' ORDER BY x DESC NULLS LAST, y) || '}' FROM t2 GROUP BY k
aagg_by_value: SELECT a % 3 AS m, array_agg(b) AS bs, COUNT(*) AS n FROM t1 GROUP BY a % 3
sqlite: SELECT a % 3, '{' || string_agg(COALESCE(CAST(b AS TEXT), 'NULL'), ',' ORDER BY b NULLS LAST) || '}', COUNT(*) FROM t1 GROUP BY a % 3
aagg_text_quoted: SELECT k, array_agg(y ORDER BY y DESC NULLS LAST) AS ys FROM t2 GROUP BY k
sqlite: SELECT k, '{' || string_agg(CASE WHEN y IS NULL THEN 'NULL' WHEN y = '' OR instr(y, ' ') > 0 OR upper(y) = 'NULL' THEN '"' || y || '"' ELSE y END, ',' ORDER BY y DESC NULLS LAST) || '}' FROM t2 GROUP BY k
aagg_distinct: SELECT k, array_agg(DISTINCT x) AS xs FROM t2 GROUP BY k
sqlite: SELECT k, '{' || string_agg(COALESCE(CAST(x AS TEXT), 'NULL'), ',' ORDER BY x NULLS LAST) || '}' FROM (SELECT DISTINCT k, x FROM t2) GROUP BY k
aagg_filter: SELECT array_agg(a ORDER BY a) FILTER (WHERE b > 1000000) AS none, array_agg(id ORDER BY id) FILTER (WHERE a > 50) AS some FROM t1
sqlite: SELECT '{' || string_agg(a, ',' ORDER BY a) FILTER (WHERE b > 1000000) || '}', '{' || string_agg(id, ',' ORDER BY id) FILTER (WHERE a > 50) || '}' FROM t1
aagg_upsert_bool: SELECT w, array_agg(v > 50 ORDER BY k) AS big FROM u GROUP BY w
sqlite: SELECT w, '{' || string_agg(CASE WHEN v IS NULL THEN 'NULL' WHEN v > 50 THEN 't' ELSE 'f' END, ',' ORDER BY k) || '}' FROM u GROUP BY w
aagg_append_only: SELECT cat, array_agg(id ORDER BY amount DESC, id) AS ids FROM e WHERE cat IS NOT NULL GROUP BY cat
sqlite: SELECT cat, '{' || string_agg(COALESCE(CAST(id AS TEXT), 'NULL'), ',' ORDER BY amount DESC, id) || '}' FROM e WHERE cat IS NOT NULL GROUP BY cat

# --- LATERAL subqueries (SQLite has none: the joins, window functions and subqueries they mean) ---
lat_top2: SELECT t3.k, q.x FROM t3 CROSS JOIN LATERAL (SELECT x FROM t2 WHERE t2.k = t3.k ORDER BY x DESC LIMIT 2) q
sqlite: SELECT t3.k, q.x FROM t3 JOIN (SELECT k, x, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x DESC) AS rn FROM t2) q ON q.k = t3.k AND q.rn <= 2
lat_agg: SELECT t1.id, q.n, q.s FROM t1, LATERAL (SELECT COUNT(*) AS n, SUM(x) AS s FROM t2 WHERE t2.k = t1.a) q
sqlite: SELECT id, (SELECT COUNT(*) FROM t2 WHERE t2.k = t1.a), (SELECT SUM(x) FROM t2 WHERE t2.k = t1.a) FROM t1
lat_left: SELECT t3.k, q.y FROM t3 LEFT JOIN LATERAL (SELECT y FROM t2 WHERE t2.k = t3.k AND t2.x > t3.w) q ON TRUE
sqlite: SELECT t3.k, t2.y FROM t3 LEFT JOIN t2 ON t2.k = t3.k AND t2.x > t3.w
lat_left_on: SELECT t3.k, q.x FROM t3 LEFT JOIN LATERAL (SELECT x FROM t2 WHERE t2.k = t3.k) q ON q.x > 10
sqlite: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t2.k = t3.k AND t2.x > 10
lat_left_on_left_only: SELECT t3.k, q.x FROM t3 LEFT JOIN LATERAL (SELECT x FROM t2 WHERE t2.k = t3.k) q ON t3.w > 20
sqlite: SELECT t3.k, t2.x FROM t3 LEFT JOIN t2 ON t2.k = t3.k AND t3.w > 20
lat_inner_on: SELECT t1.id, q.name FROM t1 JOIN LATERAL (SELECT name, w FROM t3 WHERE t3.k = t1.b) q ON q.w > t1.a
sqlite: SELECT t1.id, t3.name FROM t1 JOIN t3 ON t3.k = t1.b AND t3.w > t1.a
lat_null_key: SELECT t4.a, q.n FROM t4, LATERAL (SELECT COUNT(*) AS n FROM t2 WHERE t2.k IS NOT DISTINCT FROM t4.a) q
sqlite: SELECT a, (SELECT COUNT(*) FROM t2 WHERE t2.k IS t4.a) FROM t4
lat_source: SELECT e.id, q.name FROM e CROSS JOIN LATERAL (SELECT name FROM t3 WHERE t3.k = e.k) q
sqlite: SELECT e.id, t3.name FROM e JOIN t3 ON t3.k = e.k
lat_series: SELECT t3.k, q.g FROM t3, LATERAL (SELECT g FROM generate_series(1, t3.w % 4) AS g WHERE g <> 2) q
sqlite: SELECT k, i FROM t3 JOIN nums ON i BETWEEN 1 AND w % 4 AND i <> 2
lat_first_item: SELECT q.x FROM LATERAL (SELECT x FROM t2 WHERE x > 50) q
sqlite: SELECT x FROM t2 WHERE x > 50
lat_in_subquery: SELECT t3.k, (SELECT COUNT(*) FROM t1, LATERAL (SELECT x FROM t2 WHERE t2.k = t1.a AND t2.x > t3.w) q) AS n FROM t3
sqlite: SELECT k, (SELECT COUNT(*) FROM t1 JOIN t2 ON t2.k = t1.a AND t2.x > t3.w) FROM t3
lat_grouped: SELECT t2.k, q.m, COUNT(*) AS n FROM t2 CROSS JOIN LATERAL (SELECT MAX(w) AS m FROM t3 WHERE t3.k <= t2.x) q GROUP BY t2.k, q.m
sqlite: SELECT k, m, COUNT(*) FROM (SELECT t2.k, (SELECT MAX(w) FROM t3 WHERE t3.k <= t2.x) AS m FROM t2) GROUP BY k, m

# --- Comma joins ordered by the WHERE clause's equalities (join_order): same rows as written ---
order_three: SELECT t1.id, t3.name, t2.y FROM t1, t3, t2 WHERE t1.a = t2.x AND t2.k = t3.k
order_four_grouped: SELECT t3.name, COUNT(*) AS n, SUM(t4.a) AS s FROM t4, t3, t1, t2 WHERE t1.b = t2.x AND t4.a = t3.k AND t2.k = t3.w % 5 GROUP BY t3.name
order_constant_and_cross: SELECT t1.id, t4.b, t3.k FROM t1, t4, t3 WHERE t1.a = t3.k AND t3.w > 10 AND t4.a IS NOT NULL
order_nulls_star: SELECT * FROM t2 AS p, t4, t2 AS q WHERE p.x = q.k AND q.x = t4.a AND p.y IS NOT NULL
order_source_upsert: SELECT e.id, u.w, t3.name FROM e, t3, u WHERE u.k = e.k AND t3.k = u.v % 7
