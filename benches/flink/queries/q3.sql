-- Nexmark q3 (sql/nexmark/q3.sql): local item suggestion. Sellers in some US
-- states who auction in category 10. Same semantics: a regular (unwindowed)
-- join keeping both sides in state.
CREATE TEMPORARY VIEW nexmark_q3 AS
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
