-- Loop metrics per agent: how often loops finish on
-- their own, how many iterations that takes, and how much quality improves.
-- A loop ended when it completed, blocked or escalated; it completed
-- autonomously when no human override was recorded in it.
-- completion_rate: completed / ended (the TUI's fleet line shows the same over all agents);
-- autonomous_completion_rate: completed with no override / ended. Both NULL before a loop ended.
-- Means are rounded to 4 decimals (costs to 6): a parallel float sum differs in its last digits
-- from run to run, and the same ledger must print the same numbers. cost_usd: the sessions' costs
-- (sessions.cost_usd, NULL when none is known); mean_cost_to_completion: over completed loops.
SELECT
  coalesce(nullif(s.agent, ''), '-') AS agent,
  count(*) AS sessions,
  count(*) FILTER (WHERE s.status <> 'running') AS ended,
  count(*) FILTER (WHERE s.status = 'complete') AS completed,
  count(*) FILTER (WHERE s.status = 'complete' AND coalesce(o.overrides, 0) = 0) AS autonomous,
  count(*) FILTER (WHERE s.status = 'complete')
    / nullif(count(*) FILTER (WHERE s.status <> 'running'), 0) AS completion_rate,
  count(*) FILTER (WHERE s.status = 'complete' AND coalesce(o.overrides, 0) = 0)
    / nullif(count(*) FILTER (WHERE s.status <> 'running'), 0) AS autonomous_completion_rate,
  round(avg(s.iteration) FILTER (WHERE s.status = 'complete'), 4) AS mean_iterations_to_completion,
  round(avg(q.last_score - q.first_score), 4) AS mean_quality_improvement,
  round(avg(q.first_score), 4) AS mean_first_score,
  round(avg(q.last_score), 4) AS mean_final_score,
  round(sum(s.cost_usd), 6) AS cost_usd,
  round(avg(s.cost_usd) FILTER (WHERE s.status = 'complete'), 6) AS mean_cost_to_completion
FROM sessions s
LEFT JOIN (SELECT session_id, count(*) AS overrides FROM events WHERE type = 'override'
           GROUP BY session_id) o
  USING (session_id)
LEFT JOIN (SELECT session_id, arg_min(score, iteration) AS first_score, arg_max(score, iteration) AS last_score
           FROM iteration_scores GROUP BY session_id) q
  USING (session_id)
GROUP BY coalesce(nullif(s.agent, ''), '-')
