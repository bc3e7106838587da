"""The runner (``ralph-ledger run``): the agent's process, its output formats and usage limits, the files
it changed, its worktree."""
