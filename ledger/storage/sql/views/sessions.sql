-- One row per session: its current state, projected from its events.
SELECT
  e.session_id,
  -- an unblock override makes a blocked or escalated session run again
  CASE arg_max(type, seq) FILTER (WHERE type IN ('session_started', 'iteration_started',
                                    'session_completed', 'session_blocked', 'session_escalated')
                                  OR (type = 'override' AND kind = 'unblock'))
    WHEN 'session_completed' THEN 'complete'
    WHEN 'session_blocked' THEN 'blocked'
    WHEN 'session_escalated' THEN 'escalated'
    ELSE 'running'
  END AS status,
  arg_max(agent, seq) FILTER (WHERE type = 'session_started') AS agent,
  arg_max(task, seq) FILTER (WHERE type = 'session_started') AS task,
  arg_max(task_kind, seq) FILTER (WHERE type = 'session_started') AS task_kind,
  max(iteration) AS iteration,
  arg_max(max_iterations, seq) FILTER (WHERE max_iterations IS NOT NULL) AS max_iterations,
  -- how max_iterations = "auto" chose the limit; NULL when it was not auto or an override changed it
  nullif(arg_max(coalesce(max_iterations_reason, ''), seq)
           FILTER (WHERE type = 'session_started' OR (type = 'override' AND kind = 'max_iterations')), '')
    AS max_iterations_reason,
  arg_max(score, seq) FILTER (WHERE type = 'validation_ran') AS last_score,
  arg_max(signal, seq) FILTER (WHERE type IN ('signal_resolved', 'guard_tripped')) AS last_signal,
  coalesce(max(e.streak), 0) AS consecutive_failures,
  -- a stop request and a pause hold until an unblock (and a pause until a resume) lifts them
  coalesce(arg_max(kind, seq) FILTER (WHERE type = 'override' AND kind IN ('manual_stop', 'unblock'))
           = 'manual_stop', FALSE) AS stop_requested,
  arg_max(reason, seq) FILTER (WHERE type = 'override' AND kind = 'manual_stop') AS stop_reason,
  arg_min(ts, seq) AS started_at,  -- the first and last events by seq, whatever their clocks said
  arg_max(ts, seq) AS updated_at,
  count(e.seq) AS events,
  coalesce(sum(e.tokens), 0) AS tokens,  -- as turn_tokens defines them
  -- as turn_costs defines it, NULL when no turn's cost is known; rounded to a billionth of a dollar,
  -- since a parallel float sum differs in its last digits from run to run
  round(sum(e.cost_usd), 9) AS cost_usd,
  coalesce(arg_max(kind, seq) FILTER (WHERE type = 'override' AND kind IN ('pause', 'resume', 'unblock'))
           = 'pause', FALSE) AS paused,
  -- the git worktree (its root) and branch the loop runs in (run --worktree); NULL: the project's checkout
  nullif(arg_max(worktree, seq) FILTER (WHERE type = 'session_started'), '') AS worktree,
  nullif(arg_max(branch, seq) FILTER (WHERE type = 'session_started'), '') AS branch
FROM (
  -- The turns' tokens and the failure streak come in as extra rows rather than joins, so that a filter on session_id
  -- reaches both branches (a LEFT JOIN kept it from the detector's side: 57 ms vs 19 ms for one
  -- session of a 1M-event ledger).
  SELECT session_id, type, seq, agent, task, task_kind, iteration, max_iterations, max_iterations_reason,
         score, signal, kind, reason, ts,
         CAST(NULL AS BIGINT) AS tokens, CAST(NULL AS BIGINT) AS streak, CAST(NULL AS DOUBLE) AS cost_usd,
         worktree, branch
  FROM events
  UNION ALL
  SELECT session_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         tokens, NULL, cost_usd, NULL, NULL
  FROM turn_costs
  UNION ALL
  SELECT session_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         NULL, streak, NULL, NULL, NULL
  FROM failure_streak()
) e
GROUP BY e.session_id
