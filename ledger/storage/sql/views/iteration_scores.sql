-- The score of each iteration: that of its last validation run (the one
-- definition used by `iterations`, `quality_regression` and `validation_stall`).
SELECT
  session_id,
  iteration,
  max(seq) AS validation_seq,
  arg_max(score, seq) AS score,
  arg_max(passed, seq) AS passed,
  arg_max(results, seq) AS results
FROM events
WHERE type = 'validation_ran' AND iteration > 0
GROUP BY session_id, iteration
