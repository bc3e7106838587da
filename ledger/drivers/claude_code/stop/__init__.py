"""Claude Code's Stop and SubagentStop hook: the dispatch (``hook``), the plugin drop-in, the ledger-native
loop, the warm worker."""
