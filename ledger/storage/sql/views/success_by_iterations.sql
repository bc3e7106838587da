-- Of the loops that ended after N iterations, how many completed (the success
-- rate by iteration count), per agent.
SELECT
  coalesce(nullif(agent, ''), '-') AS agent,
  iteration AS iterations,
  count(*) AS ended,
  count(*) FILTER (WHERE status = 'complete') AS completed,
  count(*) FILTER (WHERE status = 'complete') / count(*) AS success_rate
FROM sessions
WHERE status <> 'running'
GROUP BY coalesce(nullif(agent, ''), '-'), iteration
