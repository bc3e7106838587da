-- One row per session: its current state, projected from its events.
-- Two aggregates joined by session: `a` over every event (with the turns' tokens and the failure
-- streak), `b` over the few event types whose last value a column shows. Each of b's ~15 filtered
-- arg_max then passes only those types' rows, not every event (together with the turns summed per
-- session, not one row each: ~40% of the view's time).
SELECT
  a.session_id,
  CASE b.life
    WHEN 'session_completed' THEN 'complete'
    WHEN 'session_blocked' THEN 'blocked'
    WHEN 'session_escalated' THEN 'escalated'
    ELSE 'running'
  END AS status,
  b.agent,
  b.task,
  b.task_kind,
  a.iteration,
  b.max_iterations,
  -- how max_iterations = "auto" chose the limit; NULL when it was not auto or an override changed it
  nullif(b.max_iterations_reason, '') AS max_iterations_reason,
  b.last_score,
  b.last_signal,
  coalesce(a.streak, 0) AS consecutive_failures,
  -- a stop request and a pause hold until an unblock (and a pause until a resume) lifts them
  coalesce(b.stop = 'manual_stop', FALSE) AS stop_requested,
  b.stop_reason,
  a.started_at,
  a.updated_at,
  a.events,
  coalesce(a.tokens, 0) AS tokens,  -- as turn_tokens defines them
  -- as turn_costs defines it, NULL when no turn's cost is known; rounded to a billionth of a dollar,
  -- since a parallel float sum differs in its last digits from run to run
  round(a.cost_usd, 9) AS cost_usd,
  coalesce(b.pause = 'pause', FALSE) AS paused,
  -- the git worktree (its root) and branch the loop runs in (run --worktree); NULL: the project's checkout
  nullif(b.worktree, '') AS worktree,
  nullif(b.branch, '') AS branch
FROM (
  SELECT
    session_id,
    max(iteration) AS iteration,
    arg_min(ts, seq) AS started_at,  -- the first and last events by seq, whatever their clocks said
    arg_max(ts, seq) AS updated_at,
    count(seq) AS events,
    sum(tokens) AS tokens,
    sum(cost_usd) AS cost_usd,
    max(streak) AS streak
  FROM (
    -- The turns' tokens (summed per session) and the failure streak come in as extra rows rather
    -- than joins, so that a filter on session_id reaches every branch (a LEFT JOIN kept it from the
    -- detector's side: 57 ms vs 19 ms for one session of a 1M-event ledger).
    SELECT session_id, iteration, ts, seq, CAST(NULL AS BIGINT) AS tokens, CAST(NULL AS DOUBLE) AS cost_usd,
           CAST(NULL AS BIGINT) AS streak
    FROM events
    UNION ALL
    SELECT session_id, NULL, NULL, NULL, sum(tokens), sum(cost_usd), NULL
    FROM turn_costs
    GROUP BY session_id
    UNION ALL
    SELECT session_id, NULL, NULL, NULL, NULL, NULL, streak
    FROM failure_streak()
  )
  GROUP BY session_id
) a
LEFT JOIN (
  SELECT
    session_id,
    -- an unblock override makes a blocked or escalated session run again
    arg_max(type, seq) FILTER (WHERE type IN ('session_started', 'iteration_started',
                                 'session_completed', 'session_blocked', 'session_escalated')
                               OR (type = 'override' AND kind = 'unblock')) AS life,
    arg_max(agent, seq) FILTER (WHERE type = 'session_started') AS agent,
    arg_max(task, seq) FILTER (WHERE type = 'session_started') AS task,
    arg_max(task_kind, seq) FILTER (WHERE type = 'session_started') AS task_kind,
    arg_max(max_iterations, seq) FILTER (WHERE max_iterations IS NOT NULL) AS max_iterations,
    arg_max(coalesce(max_iterations_reason, ''), seq)
      FILTER (WHERE type = 'session_started' OR (type = 'override' AND kind = 'max_iterations'))
      AS max_iterations_reason,
    arg_max(score, seq) FILTER (WHERE type = 'validation_ran') AS last_score,
    arg_max(signal, seq) FILTER (WHERE type IN ('signal_resolved', 'guard_tripped')) AS last_signal,
    arg_max(kind, seq) FILTER (WHERE type = 'override' AND kind IN ('manual_stop', 'unblock')) AS stop,
    arg_max(reason, seq) FILTER (WHERE type = 'override' AND kind = 'manual_stop') AS stop_reason,
    arg_max(kind, seq) FILTER (WHERE type = 'override' AND kind IN ('pause', 'resume', 'unblock')) AS pause,
    arg_max(worktree, seq) FILTER (WHERE type = 'session_started') AS worktree,
    arg_max(branch, seq) FILTER (WHERE type = 'session_started') AS branch
  FROM events
  -- every type a filter below names (and any event carrying max_iterations)
  WHERE type IN ('session_started', 'iteration_started', 'session_completed', 'session_blocked',
                 'session_escalated', 'override', 'validation_ran', 'signal_resolved', 'guard_tripped')
     OR max_iterations IS NOT NULL
  GROUP BY session_id
) b USING (session_id)
