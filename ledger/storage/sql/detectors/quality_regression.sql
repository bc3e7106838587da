-- params: session := NULL, span := 3, min_drop := 10
-- A regression (docs/design/guards.md#quality-regression): the last `span` scores strictly declining, with a
-- total drop greater than `min_drop`. One row per iteration at which it holds.
SELECT session_id, iteration, first_score, score, first_score - score AS drop
FROM (
  SELECT session_id, iteration, score,
         lag(score, span - 1) OVER (PARTITION BY session_id ORDER BY iteration) AS first_score,
         sum(CAST(declined AS INTEGER)) OVER (PARTITION BY session_id ORDER BY iteration
                                              ROWS BETWEEN span - 2 PRECEDING AND CURRENT ROW) AS declines
  FROM (
    SELECT session_id, iteration, score,
           coalesce(score < lag(score) OVER (PARTITION BY session_id ORDER BY iteration), FALSE) AS declined
    FROM iteration_scores
    WHERE session IS NULL OR session_id = session
  )
)
WHERE declines = span - 1 AND first_score - score > min_drop
