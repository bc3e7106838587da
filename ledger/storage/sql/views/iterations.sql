-- One row per session and iteration: what happened in it and how it ended.
SELECT
  session_id,
  iteration,
  -- first and last by seq, as sessions' started_at / updated_at: a skewed clock never reorders them
  arg_min(ts, seq) AS started_at,
  arg_max(ts, seq) AS ended_at,
  date_diff('millisecond', arg_min(ts, seq), arg_max(ts, seq)) / 1000.0 AS duration_s,
  max(s.score) AS score,
  max(s.passed) AS validation_passed,
  max(array_length(list_filter(s.results, lambda r: r.passed AND NOT r.errored))) AS rules_passed,
  max(array_length(list_filter(s.results, lambda r: NOT r.passed AND NOT r.errored))) AS rules_failed,
  max(array_length(list_filter(s.results, lambda r: r.errored))) AS rules_errored,
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
           []::VARCHAR[]) AS guards,
  -- tokens as turn_tokens defines them: tokens_total = tokens_input + tokens_output + tokens_cache
  coalesce(sum(e.input), 0) AS tokens_input,
  coalesce(sum(e.output), 0) AS tokens_output,
  coalesce(sum(e.cache), 0) AS tokens_cache,
  coalesce(sum(e.tokens), 0) AS tokens_total,
  round(sum(e.cost_usd), 9) AS cost_usd,  -- as turn_costs defines it, and rounded as sessions.cost_usd
  -- the context at the iteration's last turn that said it (turn_costs): tokens, window, fraction used
  arg_max(e.context_tokens, e.turn) FILTER (WHERE e.context_tokens IS NOT NULL) AS context_tokens,
  arg_max(e.context_window, e.turn) FILTER (WHERE e.context_tokens IS NOT NULL) AS context_window,
  arg_max(e.context_used, e.turn) FILTER (WHERE e.context_tokens IS NOT NULL) AS context_used
FROM (
  -- the turns' tokens come in as extra rows rather than a join (which took twice as long)
  SELECT session_id, iteration, seq, ts, type, files_modified, tool_count, promise, action, signal,
         decision, guard, CAST(NULL AS BIGINT) AS input, CAST(NULL AS BIGINT) AS output,
         CAST(NULL AS BIGINT) AS cache, CAST(NULL AS BIGINT) AS tokens, CAST(NULL AS DOUBLE) AS cost_usd,
         CAST(NULL AS BIGINT) AS turn, CAST(NULL AS BIGINT) AS context_tokens,
         CAST(NULL AS BIGINT) AS context_window, CAST(NULL AS DOUBLE) AS context_used
  FROM events
  UNION ALL
  SELECT session_id, iteration, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, input, output,
         cache, tokens, cost_usd, seq, context_tokens, context_window, context_used
  FROM turn_costs
) e
LEFT JOIN iteration_scores s USING (session_id, iteration)
WHERE e.iteration > 0
GROUP BY session_id, iteration
