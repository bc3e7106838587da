-- One row per session: its current state, projected from its events.
-- Four parts, each reduced to one row per session before they are joined by session_id (a filter on
-- session_id reaches every part's scan; a query that reads none of a part's columns skips it):
-- `e` over every event, `b` over the few event types whose last value a column shows (so that its
-- filtered arg_max pass only those types' rows), the turns' tokens and cost (turn_costs), and the
-- failure streak (failure_streak).
SELECT
  e.session_id,
  -- the last of the session's lifecycle events; an unblock override makes a blocked or escalated
  -- session run again, as does an iteration started after the end (e.started_seq: the iterations'
  -- starts are many, so `e` has their last seq and `b` the other lifecycle events')
  CASE WHEN e.started_seq > b.life_seq THEN 'running'
       ELSE CASE b.life
              WHEN 'session_completed' THEN 'complete'
              WHEN 'session_blocked' THEN 'blocked'
              WHEN 'session_escalated' THEN 'escalated'
              ELSE 'running'
            END
  END AS status,
  b.agent,
  b.task,
  b.task_kind,
  e.iteration,
  b.max_iterations,
  -- how max_iterations = "auto" chose the limit; NULL when it was not auto or an override changed it
  nullif(b.max_iterations_reason, '') AS max_iterations_reason,
  e.last_score,
  e.last_signal,
  coalesce(f.streak, 0) AS consecutive_failures,
  -- a stop request holds until an unblock lifts it; a pause until a resume, an unblock or the end
  coalesce(b.stop = 'manual_stop', FALSE) AS stop_requested,
  b.stop_reason,
  e.started_at,
  e.updated_at,
  e.events,
  coalesce(t.tokens, 0) AS tokens,  -- as turn_tokens defines them
  -- as turn_costs defines it, NULL when no turn's cost is known; rounded to a billionth of a dollar,
  -- since a parallel float sum differs in its last digits from run to run
  round(t.cost_usd, 9) AS cost_usd,
  coalesce(b.pause = 'pause', FALSE) AS paused,
  -- the git worktree (its root) and branch the loop runs in (run --worktree); NULL: the project's checkout
  nullif(b.worktree, '') AS worktree,
  nullif(b.branch, '') AS branch,
  -- whether the session's journal's hash chain is broken, and where ("line N: how"; "" when it holds):
  -- what the ingest and `verify` found (chain_breaks; docs/verify.md)
  c.chain_break IS NOT NULL AS chain_broken,
  coalesce(c.chain_break, '') AS chain_break,
  -- a task-list loop's tasks (0, 0 and '' for a loop without a list: docs/design/task-lists.md):
  -- how many, how many done (given done by the file, or completed), the title of the one under way
  coalesce(k.tasks_total, 0) AS tasks_total,
  coalesce(k.tasks_done, 0) AS tasks_done,
  coalesce(k.current_task, '') AS current_task
FROM (
  SELECT
    session_id,
    max(iteration) AS iteration,
    arg_min(ts, seq) AS started_at,  -- the first and last events by seq, whatever their clocks said
    arg_max(ts, seq) AS updated_at,
    count(seq) AS events,
    max(seq) FILTER (WHERE type = 'iteration_started') AS started_seq,
    arg_max(score, seq) FILTER (WHERE type = 'validation_ran') AS last_score,
    arg_max(signal, seq) FILTER (WHERE type IN ('signal_resolved', 'guard_tripped')) AS last_signal
  FROM events
  GROUP BY session_id
) e
LEFT JOIN (
  SELECT
    session_id,
    arg_max(type, seq) FILTER (WHERE type IN ('session_started', 'session_completed', 'session_blocked',
                                              'session_escalated')
                               OR (type = 'override' AND kind = 'unblock')) AS life,
    max(seq) FILTER (WHERE type IN ('session_started', 'session_completed', 'session_blocked',
                                    'session_escalated')
                     OR (type = 'override' AND kind = 'unblock')) AS life_seq,
    arg_max(agent, seq) FILTER (WHERE type = 'session_started') AS agent,
    arg_max(task, seq) FILTER (WHERE type = 'session_started') AS task,
    arg_max(task_kind, seq) FILTER (WHERE type = 'session_started') AS task_kind,
    arg_max(max_iterations, seq) FILTER (WHERE max_iterations IS NOT NULL) AS max_iterations,
    arg_max(coalesce(max_iterations_reason, ''), seq)
      FILTER (WHERE type = 'session_started' OR (type = 'override' AND kind = 'max_iterations'))
      AS max_iterations_reason,
    arg_max(kind, seq) FILTER (WHERE type = 'override' AND kind IN ('manual_stop', 'unblock')) AS stop,
    arg_max(reason, seq) FILTER (WHERE type = 'override' AND kind = 'manual_stop') AS stop_reason,
    -- a pause holds until a resume, an unblock or the session's end (ledger.loop.steering.state.is_paused)
    arg_max(CASE WHEN type = 'override' THEN kind ELSE type END, seq)
      FILTER (WHERE (type = 'override' AND kind IN ('pause', 'resume', 'unblock'))
                 OR type IN ('session_completed', 'session_blocked', 'session_escalated')) AS pause,
    arg_max(worktree, seq) FILTER (WHERE type = 'session_started') AS worktree,
    arg_max(branch, seq) FILTER (WHERE type = 'session_started') AS branch
  FROM events
  -- every type a filter above names (and any event carrying max_iterations)
  WHERE type IN ('session_started', 'session_completed', 'session_blocked', 'session_escalated', 'override')
     OR max_iterations IS NOT NULL
  GROUP BY session_id
) b USING (session_id)
LEFT JOIN (
  SELECT session_id, sum(tokens) AS tokens, sum(cost_usd) AS cost_usd
  FROM turn_costs
  GROUP BY session_id
) t USING (session_id)
LEFT JOIN failure_streak() f USING (session_id)
LEFT JOIN (SELECT session_id, min(chain_break) AS chain_break FROM chain_breaks GROUP BY session_id) c
  USING (session_id)
LEFT JOIN (
  SELECT
    session_id,
    array_length(arg_max(task_list, seq) FILTER (WHERE array_length(task_list) > 0)) AS tasks_total,
    coalesce(array_length(list_filter(arg_max(task_list, seq) FILTER (WHERE array_length(task_list) > 0),
                             lambda t: t.done)), 0)
      + count(DISTINCT task_no) FILTER (WHERE type = 'task_completed') AS tasks_done,
    CASE WHEN arg_max(type, seq) = 'task_started'
         THEN arg_max(title, seq) END AS current_task
  FROM events
  WHERE type IN ('task_started', 'task_completed', 'task_blocked')
  GROUP BY session_id
) k USING (session_id)
