-- Every evaluation of a stop hook.
SELECT session_id, iteration, seq, ts, hook_id, hook_type, action, reason, next_prompt, error
FROM events
WHERE type = 'hook_decided'
