-- The lines each iteration changed, per file (docs/snapshots.md): one row per file that iteration's
-- git snapshot (`snapshot_taken`; the last one of the iteration) changed against its parent.
-- `added` and `removed` are NULL for a binary file.
SELECT session_id, iteration, "commit", f.path AS path, f.added AS added, f.removed AS removed
FROM (
  SELECT session_id, iteration, "commit", unnest(files) AS f
  FROM (
    SELECT session_id, iteration, "commit", files
    FROM events
    WHERE type = 'snapshot_taken'
    QUALIFY row_number() OVER (PARTITION BY session_id, iteration ORDER BY seq DESC) = 1
  )
)
