-- One row per rule per validation run.
SELECT
  session_id,
  iteration,
  seq,
  ts,
  r.name AS rule,
  r.type AS rule_type,
  r.passed,
  r.errored,
  r.duration_ms,
  r.message
FROM (SELECT session_id, iteration, seq, ts, unnest(results) AS r
      FROM events WHERE type = 'validation_ran')
