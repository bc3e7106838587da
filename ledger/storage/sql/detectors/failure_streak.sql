-- params: session := NULL, min_streak := 0, errors := FALSE
-- Consecutive failed validation runs at the end of each session (the circuit
-- breaker's count): the failed runs since the last passing one. With
-- `errors := TRUE`, runs in which a rule errored (timeout, missing program)
-- since the last run without one (the error threshold's count). An `unblock`
-- override starts both counts again: the human gave the loop more iterations.
SELECT
  session_id,
  count(*) FILTER (WHERE NOT ok AND seq > last_ok) AS streak,
  min(iteration) FILTER (WHERE NOT ok AND seq > last_ok) AS since_iteration,
  max(iteration) AS last_iteration,
  -- the first failed rule's message (guarded: indexing an empty list is an error in Spark and Trino)
  arg_max(CASE WHEN array_length(list_filter(results, lambda r: NOT r.passed)) > 0
               THEN list_filter(results, lambda r: NOT r.passed)[1].message END, seq)
    FILTER (WHERE NOT ok AND seq > last_ok) AS last_failure
FROM (
  SELECT session_id, iteration, seq, ok, results,
         coalesce(max(seq) FILTER (WHERE ok) OVER (PARTITION BY session_id), 0) AS last_ok
  FROM (
    SELECT session_id, iteration, seq, results,
           CASE WHEN type = 'override' THEN TRUE
                WHEN errors THEN coalesce(array_length(list_filter(results, lambda r: r.errored)), 0) = 0
                ELSE passed END AS ok
    FROM events
    WHERE (type = 'validation_ran' OR (type = 'override' AND kind = 'unblock'))
      AND (session IS NULL OR session_id = session)
  )
)
GROUP BY session_id
HAVING count(*) FILTER (WHERE NOT ok AND seq > last_ok) >= min_streak
