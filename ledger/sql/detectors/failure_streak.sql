-- params: session := NULL, min_streak := 0
-- Consecutive failed validations at the end of each session (circuit breaker).
-- streak = failed validation runs since the last passing one.
SELECT
  session_id,
  count(*) FILTER (WHERE NOT passed AND seq > last_pass) AS streak,
  min(iteration) FILTER (WHERE NOT passed AND seq > last_pass) AS since_iteration,
  max(iteration) AS last_iteration,
  arg_max(list_filter(results, lambda r: NOT r.passed)[1].message, seq)
    FILTER (WHERE NOT passed AND seq > last_pass) AS last_failure
FROM (
  SELECT session_id, iteration, seq, passed, results,
         coalesce(max(seq) FILTER (WHERE passed) OVER (PARTITION BY session_id), 0) AS last_pass
  FROM events
  WHERE type = 'validation_ran' AND (session IS NULL OR session_id = session)
)
GROUP BY session_id
HAVING count(*) FILTER (WHERE NOT passed AND seq > last_pass) >= min_streak
