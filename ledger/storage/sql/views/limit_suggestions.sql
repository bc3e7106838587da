-- Adaptive iteration limits (docs/design/iteration-limits.md): per agent and task kind (session_started.task_kind,
-- '-' when none was configured), the iteration count that covered 90% of the past loops that completed
-- (the nearest-rank 90th percentile: the least N such that at least 90% of them took N iterations or
-- fewer, i.e. the least N whose cume_dist reaches 0.9), with how many completed loops it is based on.
-- max_iterations = "auto" uses it, between auto_floor and auto_ceiling, once enough_loops (10 completed
-- loops or more); before that, the configured default (ledger.loop.decide.limits). Completed and iterations
-- are as sessions has them (status 'complete', iteration), and the agent as loop_metrics and
-- success_by_iterations name it.
SELECT
  agent,
  task_kind,
  count(*) AS completed_loops,
  min(CASE WHEN covered >= 0.9 THEN iteration END) AS suggested_max_iterations,
  min(iteration) AS fewest_iterations,
  max(iteration) AS most_iterations,
  count(*) >= 10 AS enough_loops
FROM (
  SELECT agent, task_kind, iteration,
         cume_dist() OVER (PARTITION BY agent, task_kind ORDER BY iteration) AS covered
  FROM (
    SELECT coalesce(nullif(agent, ''), '-') AS agent, coalesce(nullif(task_kind, ''), '-') AS task_kind,
           iteration
    FROM sessions
    WHERE status = 'complete'
  )
)
GROUP BY agent, task_kind
