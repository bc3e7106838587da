-- One row per session and iteration: what happened in it and how it ended.
SELECT
  session_id,
  iteration,
  min(ts) AS started_at,
  max(ts) AS ended_at,
  date_diff('millisecond', min(ts), max(ts)) / 1000.0 AS duration_s,
  arg_max(score, seq) FILTER (WHERE type = 'validation_ran') AS score,
  arg_max(passed, seq) FILTER (WHERE type = 'validation_ran') AS validation_passed,
  arg_max(len(list_filter(results, lambda r: r.passed AND NOT r.errored)), seq)
    FILTER (WHERE type = 'validation_ran') AS rules_passed,
  arg_max(len(list_filter(results, lambda r: NOT r.passed AND NOT r.errored)), seq)
    FILTER (WHERE type = 'validation_ran') AS rules_failed,
  arg_max(len(list_filter(results, lambda r: r.errored)), seq)
    FILTER (WHERE type = 'validation_ran') AS rules_errored,
  coalesce(list_sort(list_distinct(flatten(list(files_modified) FILTER (WHERE type = 'agent_turn')))),
           []::VARCHAR[]) AS files_modified,
  coalesce(sum(tool_count) FILTER (WHERE type = 'agent_turn'), 0) AS tool_count,
  arg_max(promise, seq) FILTER (WHERE type = 'promise_detected') AS promise,
  arg_max(action, seq) FILTER (WHERE type = 'hook_decided') AS hook_action,
  arg_max(signal, seq) FILTER (WHERE type = 'signal_resolved') AS signal,
  arg_max(decision, seq) FILTER (WHERE type = 'stop_decided') AS stop_decision,
  count(*) FILTER (WHERE type = 'guard_tripped') AS guard_trips,
  coalesce(list(guard ORDER BY seq) FILTER (WHERE type = 'guard_tripped'), []::VARCHAR[]) AS guards,
  coalesce(sum(tokens.input) FILTER (WHERE type = 'agent_turn'), 0) AS tokens_input,
  coalesce(sum(tokens.output) FILTER (WHERE type = 'agent_turn'), 0) AS tokens_output,
  coalesce(sum(tokens.input + tokens.output + tokens.cache_creation + tokens.cache_read)
           FILTER (WHERE type = 'agent_turn'), 0) AS tokens_total
FROM events
WHERE iteration > 0
GROUP BY session_id, iteration
