"""Plain output (any agent without a structured format, e.g. GitHub Copilot CLI's ``copilot -p``):
the whole output is the final text; nothing else is reported."""

from __future__ import annotations

from ledger.drivers.runner.formats.report import AgentReport


def parse(output: str) -> AgentReport:
    """The report of a plain-text output: its text, nothing more."""
    return AgentReport(text=output)
