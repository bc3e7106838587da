-- params: session := NULL, span := 3
-- No progress (docs/design/guards.md#validation-stall): the last `span` scored
-- iterations all failed to beat the best score seen before them, and the
-- latest score is below 100. One row per iteration at which it holds.
SELECT session_id, iteration, score, best_before
FROM (
  SELECT session_id, iteration, score, best_before,
         sum(CASE WHEN improved THEN 0 ELSE 1 END)
           OVER (PARTITION BY session_id ORDER BY iteration
                 ROWS BETWEEN span - 1 PRECEDING AND CURRENT ROW) AS flat,
         row_number() OVER (PARTITION BY session_id ORDER BY iteration) AS nth
  FROM (
    SELECT session_id, iteration, score,
           max(score) OVER (PARTITION BY session_id ORDER BY iteration
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS best_before,
           coalesce(score > best_before, TRUE) AS improved
    FROM iteration_scores
    WHERE session IS NULL OR session_id = session
  )
)
WHERE nth >= span AND flat = span AND score < 100
