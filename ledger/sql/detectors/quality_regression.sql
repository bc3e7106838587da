-- params: session := NULL, span := 3, min_drop := 10
-- Seed 000 §5.3: the last `span` validation scores strictly declining, with a
-- total drop greater than `min_drop`. One row per iteration at which it holds.
SELECT session_id, iteration, scores, scores[1] - scores[-1] AS drop
FROM (
  SELECT session_id, iteration,
         list(score) OVER (PARTITION BY session_id ORDER BY iteration
                           ROWS BETWEEN span - 1 PRECEDING AND CURRENT ROW) AS scores
  FROM iteration_scores
  WHERE session IS NULL OR session_id = session
)
WHERE len(scores) = span
  AND len(list_distinct(scores)) = span
  AND list_sort(scores, 'DESC') = scores
  AND scores[1] - scores[-1] > min_drop
