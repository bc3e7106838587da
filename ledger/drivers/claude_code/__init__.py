"""Claude Code: the Stop hook's entry (``hook``), the ralph-loop plugin's state file and decisions
(``plugin``), the ledger-native loop (``native``), the settings installer and transcript reading."""
