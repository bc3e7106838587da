-- params: session := NULL, span := 3
-- Seed 003 §5.1 "no progress for 3 iterations": the last `span` scored
-- iterations all failed to beat the best score seen before them, and the
-- latest score is below 100. One row per iteration at which it holds.
SELECT session_id, iteration, score, best_before
FROM (
  SELECT session_id, iteration, score,
         max(score) OVER (PARTITION BY session_id ORDER BY iteration
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS best_before,
         list(improved) OVER (PARTITION BY session_id ORDER BY iteration
                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)[-span:] AS recent
  FROM (
    SELECT session_id, iteration, score,
           coalesce(score > max(score) OVER (PARTITION BY session_id ORDER BY iteration
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                    TRUE) AS improved
    FROM iterations
    WHERE score IS NOT NULL AND (session IS NULL OR session_id = session)
  )
)
WHERE len(recent) = span AND NOT list_bool_or(recent) AND score < 100
