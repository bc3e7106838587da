-- Checkpoints as created, with whether (and why) they were expired since.
SELECT
  c.session_id,
  c.checkpoint_id,
  c.iteration,
  c.seq,
  c.ts AS created_at,
  c.trigger,
  c.phase,
  c.step,
  c.agent_context,
  c.draft,
  c.draft_type,
  c.expires_at,
  x.ts IS NOT NULL AS expired,
  x.reason AS expired_reason
FROM events c
LEFT JOIN (SELECT session_id, checkpoint_id, min(ts) AS ts, arg_min(reason, seq) AS reason
           FROM events WHERE type = 'checkpoint_expired'
           GROUP BY session_id, checkpoint_id) x
  ON x.session_id = c.session_id AND x.checkpoint_id = c.checkpoint_id
WHERE c.type = 'checkpoint_created'
