-- One row per session and iteration: what happened in it and how it ended.
-- Three parts, each reduced to one row per iteration before they are joined (joining them row by
-- row, then aggregating, copied each iteration's rule results onto all of its events): its events,
-- its turns' tokens and cost (turn_costs), and its score (iteration_scores).
SELECT
  e.session_id,
  e.iteration,
  e.started_at,
  e.ended_at,
  -- whole milliseconds of each end (DuckDB counts boundaries, Spark the difference: both agree so)
  date_diff('millisecond', date_trunc('millisecond', e.started_at), date_trunc('millisecond', e.ended_at))
    / 1000.0 AS duration_s,
  s.score AS score,
  s.passed AS validation_passed,
  array_length(list_filter(s.results, lambda r: r.passed AND NOT r.errored)) AS rules_passed,
  array_length(list_filter(s.results, lambda r: NOT r.passed AND NOT r.errored)) AS rules_failed,
  array_length(list_filter(s.results, lambda r: r.errored)) AS rules_errored,
  e.files_modified,
  e.tool_count,
  e.promise,
  e.hook_action,
  e.signal,
  e.stop_decision,
  e.guard_trips,
  e.guards,
  coalesce(t.input, 0) AS tokens_input,
  coalesce(t.output, 0) AS tokens_output,
  coalesce(t.cache, 0) AS tokens_cache,
  coalesce(t.tokens, 0) AS tokens_total,
  round(t.cost_usd, 9) AS cost_usd,  -- as turn_costs defines it, and rounded as sessions.cost_usd
  -- the context at the iteration's last turn that said it (turn_costs): tokens, window, fraction used
  t.context_tokens,
  t.context_window,
  t.context_used
FROM (
  SELECT
    session_id,
    iteration,
    -- first and last by seq, as sessions' started_at / updated_at: a skewed clock never reorders them
    arg_min(ts, seq) AS started_at,
    arg_max(ts, seq) AS ended_at,
    coalesce(list_sort(list_distinct(flatten(list(files_modified) FILTER (WHERE type = 'agent_turn')))),
             []::VARCHAR[]) AS files_modified,
    coalesce(sum(tool_count) FILTER (WHERE type = 'agent_turn'), 0) AS tool_count,
    arg_max(promise, seq) FILTER (WHERE type = 'promise_detected') AS promise,
    arg_max(action, seq) FILTER (WHERE type = 'hook_decided') AS hook_action,
    arg_max(signal, seq) FILTER (WHERE type = 'signal_resolved') AS signal,
    arg_max(decision, seq) FILTER (WHERE type = 'stop_decided') AS stop_decision,
    count(*) FILTER (WHERE type = 'guard_tripped') AS guard_trips,
    -- in seq order: sorted (seq, guard) pairs, as an aggregate's ORDER BY does not reach every engine
    coalesce(list_transform(list_sort(list(struct_pack(seq := seq, guard := guard))
                                      FILTER (WHERE type = 'guard_tripped')), lambda g: g.guard),
             []::VARCHAR[]) AS guards
  FROM events
  WHERE iteration > 0
  GROUP BY session_id, iteration
) e
LEFT JOIN (
  -- tokens as turn_tokens defines them: tokens_total = tokens_input + tokens_output + tokens_cache
  SELECT
    session_id,
    iteration,
    sum(input) AS input,
    sum(output) AS output,
    sum(cache) AS cache,
    sum(tokens) AS tokens,
    sum(cost_usd) AS cost_usd,
    arg_max(context_tokens, seq) FILTER (WHERE context_tokens IS NOT NULL) AS context_tokens,
    arg_max(context_window, seq) FILTER (WHERE context_tokens IS NOT NULL) AS context_window,
    arg_max(context_used, seq) FILTER (WHERE context_tokens IS NOT NULL) AS context_used
  FROM turn_costs
  WHERE iteration > 0
  GROUP BY session_id, iteration
) t USING (session_id, iteration)
LEFT JOIN iteration_scores s USING (session_id, iteration)
