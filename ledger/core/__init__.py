"""Shared basics every layer uses: error wording, the ledger home, atomic writes, locks, Ctrl-C
handling and the rendering of query results."""
