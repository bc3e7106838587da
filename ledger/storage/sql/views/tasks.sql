-- One row per task of a task-list loop's list (the list its first task_started recorded), pending ones
-- included: its status (pending, running, done, blocked or skipped: its last task_started against
-- its last task_completed / task_blocked), the iterations it took (from the one its task_started
-- began to the one that ended it; a running task's reach the session's current iteration), their
-- tokens and cost (turn_costs), the seconds from its start to its end (or the session's last event).
-- A task the file gave as done already is done with no iterations. docs/design/task-lists.md.
SELECT
  k.session_id,
  k.task_no,
  k.title,
  k.status,
  coalesce(k.last_iteration - k.first_iteration + 1, 0) AS iterations,
  coalesce(sum(tc.tokens), 0) AS tokens,
  round(sum(tc.cost_usd), 9) AS cost_usd,  -- as turn_costs defines it, rounded as sessions.cost_usd
  -- whole milliseconds of each end, as iterations.duration_s
  date_diff('millisecond', date_trunc('millisecond', k.started_at), date_trunc('millisecond', k.ended_at))
    / 1000.0 AS seconds,
  k.first_iteration,
  k.last_iteration
FROM (
  SELECT
    l.session_id,
    l.t.task_no AS task_no,
    l.t.title AS title,
    CASE
      WHEN e.end_seq > coalesce(s.start_seq, 0) THEN
        CASE WHEN e.end_type = 'task_completed' THEN 'done' WHEN e.skipped THEN 'skipped' ELSE 'blocked' END
      WHEN s.start_seq IS NOT NULL THEN 'running'
      WHEN l.t.done THEN 'done'
      ELSE 'pending'
    END AS status,
    s.first_iteration,
    s.started_at,
    -- where its work ends: its end, once it ended after its last start; else the session's now
    CASE WHEN s.start_seq IS NULL THEN NULL
         WHEN e.end_seq > s.start_seq THEN e.end_iteration ELSE n.iteration END AS last_iteration,
    CASE WHEN s.start_seq IS NULL THEN NULL
         WHEN e.end_seq > s.start_seq THEN e.end_ts ELSE n.last_ts END AS ended_at
  FROM (
    SELECT session_id, unnest(task_list) AS t
    FROM (SELECT session_id, arg_max(task_list, seq) AS task_list
          FROM events WHERE type = 'task_started' AND array_length(task_list) > 0 GROUP BY session_id)
  ) l
  LEFT JOIN (
    SELECT session_id, task_no, min(iteration) AS first_iteration, arg_min(ts, seq) AS started_at,
           max(seq) AS start_seq
    FROM events WHERE type = 'task_started' GROUP BY session_id, task_no
  ) s ON s.session_id = l.session_id AND s.task_no = l.t.task_no
  LEFT JOIN (
    SELECT session_id, task_no, max(seq) AS end_seq, arg_max(type, seq) AS end_type,
           arg_max(skipped, seq) AS skipped, arg_max(iteration, seq) AS end_iteration,
           arg_max(ts, seq) AS end_ts
    FROM events WHERE type IN ('task_completed', 'task_blocked') GROUP BY session_id, task_no
  ) e ON e.session_id = l.session_id AND e.task_no = l.t.task_no
  LEFT JOIN (
    SELECT session_id, max(iteration) AS iteration, arg_max(ts, seq) AS last_ts
    FROM events GROUP BY session_id
  ) n ON n.session_id = l.session_id
) k
LEFT JOIN turn_costs tc
  ON tc.session_id = k.session_id AND tc.iteration BETWEEN k.first_iteration AND k.last_iteration
GROUP BY k.session_id, k.task_no, k.title, k.status, k.first_iteration, k.started_at, k.last_iteration,
         k.ended_at
