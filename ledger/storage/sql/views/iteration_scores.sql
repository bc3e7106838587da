-- The score of each iteration: that of its last validation run (the one
-- definition used by `iterations`, `quality_regression` and `validation_stall`).
-- The last run's row is picked whole (row_number, not one arg_max per column: arg_max copies
-- `results`, a list, for every row it passes; DuckDB plans this as one pass and a semi-join).
SELECT session_id, iteration, seq AS validation_seq, score, passed, results
FROM (
  SELECT session_id, iteration, seq, score, passed, results,
         row_number() OVER (PARTITION BY session_id, iteration ORDER BY seq DESC) AS nth
  FROM events
  WHERE type = 'validation_ran' AND iteration > 0
)
WHERE nth = 1
