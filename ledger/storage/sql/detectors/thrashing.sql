-- params: session := NULL, min_iterations := 5
-- Thrashing (docs/design/guards.md#thrashing): the same file modified in at least `min_iterations` distinct
-- iterations. `tripped_at` is the iteration in which the threshold was reached.
SELECT
  session_id,
  file,
  array_length(iterations) AS times,
  iterations,
  iterations[min_iterations] AS tripped_at
FROM (
  SELECT session_id, file, list_sort(list(DISTINCT iteration)) AS iterations
  FROM (SELECT session_id, iteration, unnest(files_modified) AS file
        FROM events
        WHERE type = 'agent_turn' AND iteration > 0 AND (session IS NULL OR session_id = session))
  GROUP BY session_id, file
)
WHERE array_length(iterations) >= min_iterations
