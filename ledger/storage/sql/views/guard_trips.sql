-- Every safety guard that tripped, with its evidence and the signal it forced.
SELECT session_id, iteration, seq, ts, guard, detail, signal, evidence
FROM events
WHERE type = 'guard_tripped'
