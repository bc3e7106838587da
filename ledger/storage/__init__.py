"""Storage: the journals (the source of truth), their ingest into the DuckDB ledger, its schema, the
read-only query surface, export, and the SQL views and detectors (``sql/``)."""
