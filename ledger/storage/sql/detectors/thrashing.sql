-- params: session := NULL, min_iterations := 5
-- Thrashing (docs/design/guards.md#thrashing): the same file modified in at least `min_iterations` distinct
-- iterations. `tripped_at` is the iteration in which the threshold was reached. `lines`: the lines added
-- and removed in the file over those iterations, as the git snapshots counted them (the `changes` view;
-- NULL without snapshots, or for a binary file): evidence, never part of the threshold.
SELECT
  t.session_id,
  t.file,
  array_length(t.iterations) AS times,
  t.iterations,
  t.iterations[min_iterations] AS tripped_at,
  (SELECT sum(c.added + c.removed) FROM changes c
   WHERE c.session_id = t.session_id AND c.path = t.file AND list_contains(t.iterations, c.iteration)) AS lines
FROM (
  SELECT session_id, file, list_sort(list(DISTINCT iteration)) AS iterations
  FROM (SELECT session_id, iteration, unnest(files_modified) AS file
        FROM events
        WHERE type = 'agent_turn' AND iteration > 0 AND (session IS NULL OR session_id = session))
  GROUP BY session_id, file
) t
WHERE array_length(t.iterations) >= min_iterations
