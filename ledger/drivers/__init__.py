"""Integrations with the agents a loop drives: the runner (``ralph-ledger run``) and Claude Code."""
