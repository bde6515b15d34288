-- Checks arithmetic: integer division truncates toward zero, % keeps the
-- dividend's sign, division or modulo by zero and integer overflow are
-- NULL (a bad row must not stop a view), INT with DOUBLE is DOUBLE, INT
-- with DECIMAL is DECIMAL, unary minus, and NULL operands.
CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT);
INSERT INTO t VALUES
    (1, 7, 2),
    (2, -7, 2),
    (3, 7, 0),
    (4, 9223372036854775807, 1),
    (5, NULL, 3);

CREATE MATERIALIZED VIEW ints AS
SELECT id, a + b AS sum, a - b AS difference, a * b AS product, a / b AS quotient, a % b AS remainder, -a AS negated
FROM t;

CREATE MATERIALIZED VIEW mixed AS
SELECT id, a / 2.0 AS by_decimal, a * 0.5e0 AS by_double, a + 0.25 AS plus_decimal
FROM t WHERE id <= 3;

CREATE MATERIALIZED VIEW constants AS
SELECT 1 + 2 * 3 AS precedence, (1 + 2) * 3 AS grouped, 10 / 4 AS int_division, 10 % 4 AS int_modulo,
       1.5 + 1 AS decimal_sum, 0.1 + 0.2 AS decimal_exact, 2 - 5 AS negative;
