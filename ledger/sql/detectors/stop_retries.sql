-- params: session := NULL
-- Stops blocked in a row within one iteration (seed 002's retry_count): the
-- `stop_decided` block events of each session's latest iteration since its
-- last allowed stop.
SELECT session_id, iteration, count(*) AS retries
FROM (
  SELECT session_id, iteration, seq, decision,
         max(iteration) OVER (PARTITION BY session_id) AS current_iteration,
         coalesce(max(seq) FILTER (WHERE decision = 'allow') OVER (PARTITION BY session_id), 0) AS last_allow
  FROM events
  WHERE type = 'stop_decided' AND (session IS NULL OR session_id = session)
)
WHERE decision = 'block' AND iteration = current_iteration AND seq > last_allow
GROUP BY session_id, iteration
