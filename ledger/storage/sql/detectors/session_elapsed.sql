-- params: session := NULL, now := NULL, max_step_s := 86400
-- How long each session has run by its own clock (the time limit's measure). The session's clock
-- readings are its events' timestamps in seq order from its first `session_started` (then `now`,
-- when given): elapsed_s is the sum of the steps between consecutive readings. A step backwards
-- (a clock set back, or one event stamped by a skewed clock) or forwards by more than
-- `max_step_s` (a clock jump) is not time worked: it adds nothing and is counted in
-- `backward_steps` / `forward_jumps`, with the seconds set aside in `skipped_s`.
SELECT
  session_id,
  coalesce(sum(step) FILTER (WHERE step BETWEEN 0 AND max_step_s * 1e6), 0) / 1e6 AS elapsed_s,
  count(*) FILTER (WHERE step < 0) AS backward_steps,
  count(*) FILTER (WHERE step > max_step_s * 1e6) AS forward_jumps,
  coalesce(sum(abs(step)) FILTER (WHERE step < 0 OR step > max_step_s * 1e6), 0) / 1e6 AS skipped_s
FROM (
  SELECT session_id,
         date_diff('microsecond', lag(ts) OVER (PARTITION BY session_id ORDER BY seq), ts) AS step  -- microseconds: sums are exact
  FROM (
    SELECT session_id, seq, ts FROM (
      SELECT session_id, seq, ts,
             min(seq) FILTER (WHERE type = 'session_started') OVER (PARTITION BY session_id) AS first_seq
      FROM events
      WHERE session IS NULL OR session_id = session
    )
    WHERE seq >= coalesce(first_seq, 0)
    UNION ALL
    SELECT DISTINCT session_id, 9223372036854775807, CAST(now AS TIMESTAMP)
    FROM events
    WHERE now IS NOT NULL AND (session IS NULL OR session_id = session)
  )
)
GROUP BY session_id
