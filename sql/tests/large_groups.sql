-- Checks MIN, MAX, COUNT(DISTINCT) and ROW_NUMBER top-k over groups large
-- enough that their state spills to one entry per value (past 256 bytes
-- inline, docs/state.md), phase by phase: deletes and updates take away
-- the extremes and the first rows, which fall back to the next ones; TEXT,
-- DOUBLE and DECIMAL values, NULLs and duplicate names.
CREATE TABLE t (id INT PRIMARY KEY, g TEXT, name TEXT, x DOUBLE, d DECIMAL(10,2));
INSERT INTO t VALUES
(1, 'a', 'foxtrot-0018-padding-to-spill-the-inline-head', -944.655, -398.87),
(2, 'a', 'alpha-0028-padding-to-spill-the-inline-head', -221.889, -830.73),
(3, 'a', 'golf-0030-padding-to-spill-the-inline-head', -387.632, -752.18),
(4, 'a', 'charlie-0003-padding-to-spill-the-inline-head', -451.541, 600.62),
(5, 'a', 'alpha-0024-padding-to-spill-the-inline-head', -690.097, 373.23),
(6, 'a', 'bravo-0025-padding-to-spill-the-inline-head', -877.534, -330.96),
(7, 'a', 'alpha-0025-padding-to-spill-the-inline-head', -226.522, -562.87),
(8, 'a', 'echo-0009-padding-to-spill-the-inline-head', -236.793, -442.18),
(9, 'a', 'delta-0014-padding-to-spill-the-inline-head', 70.557, 591.89),
(10, 'a', 'charlie-0018-padding-to-spill-the-inline-head', 436.661, 424.67),
(11, 'a', 'golf-0007-padding-to-spill-the-inline-head', -503.109, -706.56),
(12, 'a', 'bravo-0025-padding-to-spill-the-inline-head', -111.022, 87.70),
(13, 'a', NULL, -765.941, -258.41),
(14, 'a', 'delta-0025-padding-to-spill-the-inline-head', -650.553, -103.55),
(15, 'a', 'hotel-0027-padding-to-spill-the-inline-head', 814.873, 364.08),
(16, 'a', 'hotel-0013-padding-to-spill-the-inline-head', 730.935, -49.33),
(17, 'a', 'charlie-0014-padding-to-spill-the-inline-head', -449.492, -386.96),
(18, 'a', 'charlie-0009-padding-to-spill-the-inline-head', -377.834, -215.07),
(19, 'a', 'bravo-0018-padding-to-spill-the-inline-head', 49.191, 65.37),
(20, 'a', 'delta-0013-padding-to-spill-the-inline-head', 886.437, -188.81),
(21, 'a', 'foxtrot-0030-padding-to-spill-the-inline-head', 488.076, 193.03),
(22, 'a', 'bravo-0002-padding-to-spill-the-inline-head', 468.2, -118.92),
(23, 'a', 'golf-0010-padding-to-spill-the-inline-head', -653.222, -512.26),
(24, 'a', 'golf-0010-padding-to-spill-the-inline-head', -36.091, 735.72),
(25, 'a', 'echo-0000-padding-to-spill-the-inline-head', 868.001, 611.46),
(26, 'a', NULL, 273.766, 342.66),
(27, 'a', 'alpha-0005-padding-to-spill-the-inline-head', -460.852, 314.51),
(28, 'a', 'echo-0002-padding-to-spill-the-inline-head', 716.327, 435.34),
(29, 'a', 'hotel-0024-padding-to-spill-the-inline-head', -712.833, 691.14),
(30, 'a', 'charlie-0014-padding-to-spill-the-inline-head', 865.26, 703.98),
(31, 'a', 'foxtrot-0023-padding-to-spill-the-inline-head', 627.942, -612.57),
(32, 'a', 'bravo-0014-padding-to-spill-the-inline-head', -348.521, -548.11),
(33, 'a', 'charlie-0008-padding-to-spill-the-inline-head', 485.172, 183.33),
(34, 'a', 'hotel-0000-padding-to-spill-the-inline-head', -186.428, 212.70),
(35, 'a', 'hotel-0020-padding-to-spill-the-inline-head', -216.066, -619.69),
(36, 'a', 'bravo-0012-padding-to-spill-the-inline-head', -198.614, 363.05),
(37, 'a', 'echo-0028-padding-to-spill-the-inline-head', 965.476, 356.32),
(38, 'a', 'hotel-0014-padding-to-spill-the-inline-head', -564.179, 520.03),
(39, 'a', NULL, 910.098, -185.52),
(40, 'a', 'hotel-0021-padding-to-spill-the-inline-head', -467.554, 453.39),
(41, 'b', 'bravo-0021-padding-to-spill-the-inline-head', -528.419, 891.59),
(42, 'b', 'echo-0021-padding-to-spill-the-inline-head', -781.11, -986.69),
(43, 'b', 'bravo-0024-padding-to-spill-the-inline-head', -99.322, 305.63),
(44, 'b', 'echo-0007-padding-to-spill-the-inline-head', 66.272, 364.15),
(45, 'b', 'foxtrot-0030-padding-to-spill-the-inline-head', -785.026, -103.72),
(46, 'b', 'foxtrot-0027-padding-to-spill-the-inline-head', 560.891, -220.19),
(47, 'b', 'foxtrot-0021-padding-to-spill-the-inline-head', 271.212, -157.30),
(48, 'b', 'echo-0030-padding-to-spill-the-inline-head', -657.662, 322.30),
(49, 'b', 'hotel-0001-padding-to-spill-the-inline-head', -982.827, 927.93),
(50, 'b', 'bravo-0018-padding-to-spill-the-inline-head', 729.654, 577.33),
(51, 'b', 'golf-0027-padding-to-spill-the-inline-head', -808.541, 490.45),
(52, 'b', NULL, -477.724, 139.71),
(53, 'b', 'alpha-0005-padding-to-spill-the-inline-head', 526.094, 26.60),
(54, 'b', 'bravo-0020-padding-to-spill-the-inline-head', -76.188, -208.43),
(55, 'b', 'charlie-0001-padding-to-spill-the-inline-head', -521.303, 392.29),
(56, 'b', 'golf-0011-padding-to-spill-the-inline-head', 550.142, -176.35),
(57, 'b', 'bravo-0024-padding-to-spill-the-inline-head', -81.734, -508.96),
(58, 'b', 'delta-0022-padding-to-spill-the-inline-head', -604.713, 840.37),
(59, 'b', 'delta-0001-padding-to-spill-the-inline-head', 373.621, -926.29),
(60, 'b', 'echo-0030-padding-to-spill-the-inline-head', -288.221, -162.19);

CREATE MATERIALIZED VIEW stats AS
SELECT g, MIN(name) AS first_name, MAX(name) AS last_name, COUNT(DISTINCT name) AS names,
       MIN(x) AS lo, MAX(x) AS hi, MIN(d) AS dlo, MAX(d) AS dhi, COUNT(*) AS n
FROM t GROUP BY g;
CREATE MATERIALIZED VIEW top3 AS
SELECT g, id, x FROM (
    SELECT g, id, x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY x DESC) AS rn FROM t
) AS ranked WHERE rn <= 3;
CREATE MATERIALIZED VIEW last2 AS SELECT id, name FROM t ORDER BY name DESC NULLS LAST, id LIMIT 2;
-- run
DELETE FROM t WHERE id IN (1, 2, 15, 24, 27, 37, 46, 50);
-- run
UPDATE t SET x = 5000.5 WHERE id = 7;
UPDATE t SET x = -5000.5, name = 'zulu-9999-padding-to-spill-the-inline-head' WHERE id = 8;
UPDATE t SET name = 'alpha-0000-padding-to-spill-the-inline-head', d = -99999.99 WHERE id = 45;
-- run
DELETE FROM t WHERE g = 'a';
UPDATE t SET x = NULL WHERE id = 45;
