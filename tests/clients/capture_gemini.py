"""Capture Gemini CLI's real output for ``tests/fixtures/clients/gemini-cli-<version>/`` (run by
hand: ``.venv/bin/python -m tests.clients.capture_gemini``; the pinned clients must be installed).

Each case runs the real ``gemini`` once against the ``streamGenerateContent`` mock and writes its
stdout (``CASE.jsonl``, ``CASE.json`` or ``CASE.txt``), its stderr when the case is about it
(``CASE.stderr.txt``) and what the mock served (``CASE.served.json``: every usage in order with its
model and whether a turn or a side request got it, the final reply's text, the files the tool calls
wrote, the tool calls), from which ``tests/unit/test_captures_gemini.py`` computes what the parser must
read."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.clients.conftest import installed_bin
from tests.clients.gemini_client import complete, gemini_env, write_then_continue
from tests.clients.mocks.base import Reply, Script, Turn, Usage
from tests.clients.mocks.gemini import MODEL, GeminiAPI, quota_exceeded

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.61.0"
OUT = ROOT / "tests" / "fixtures" / "clients" / f"gemini-cli-{VERSION}"
NOTES = "/tmp/gemini-capture/notes.txt"
"""Where the captured write_file calls write (a fixed path, so that the captures do not change)."""

EMPTY = Reply(usage=Usage(input=10))
"""A model turn with nothing in it: Gemini CLI 0.61.0 ends with an error, and exits 0."""

CASES: dict[str, tuple[list[str], Sequence[Turn], int | None, str]] = {
    # name: (gemini's arguments, the turns served, the CLI's maxAttempts, the stdout's extension)
    "stream-json-auto-tools": (["-o", "stream-json", "--yolo"], write_then_continue(NOTES), None, "jsonl"),
    "stream-json-model-tools": (
        ["-o", "stream-json", "--yolo", "-m", MODEL],
        write_then_continue(NOTES),
        None,
        "jsonl",
    ),
    "json-auto-tools": (["-o", "json", "--yolo"], write_then_continue(NOTES), None, "json"),
    "json-model": (["-o", "json", "--yolo", "-m", MODEL], complete(), None, "json"),
    "plain-tools": (["--yolo", "-m", MODEL], write_then_continue(NOTES), None, "txt"),
    "stream-json-429": (
        ["-o", "stream-json", "--yolo", "-m", MODEL],
        [quota_exceeded(per="Minute", retry_s=1)],
        1,
        "jsonl",
    ),
    "json-429": (["-o", "json", "--yolo", "-m", MODEL], [quota_exceeded(per="Minute", retry_s=1)], 1, "json"),
    "stream-json-empty": (["-o", "stream-json", "--yolo", "-m", MODEL], [EMPTY], 1, "jsonl"),
    "json-empty": (["-o", "json", "--yolo", "-m", MODEL], [EMPTY], 1, "json"),
    "stream-json-429-daily": (
        ["-o", "stream-json", "--yolo", "-m", MODEL],
        [quota_exceeded(per="Day")],
        None,
        "jsonl",
    ),
}


def _gemini() -> Path:
    return installed_bin() / "gemini"


def served(api: GeminiAPI, turns: Sequence[Turn]) -> dict[str, Any]:
    """What the mock served, for the replay tests."""
    replies = [t for t in turns if isinstance(t, Reply)]
    calls = [c for r in replies[: len(api.replies())] for c in r.tool_calls]
    return {
        "log": [{"model": m, "usage": asdict(u), "turn": turn} for m, u, turn in api.log],
        "final_text": api.replies()[-1].text if api.replies() else "",
        "tool_calls": len(calls),
        "files": [c.arguments["file_path"] for c in calls if c.name == "write_file"],
    }


def capture(name: str, gemini: Path) -> None:
    """Run case ``name`` and write its files."""
    args, turns, attempts, ext = CASES[name]
    Path(NOTES).parent.mkdir(parents=True, exist_ok=True)
    api = GeminiAPI(Script(turns, after=EMPTY if turns == [EMPTY] else None))
    with tempfile.TemporaryDirectory() as tmp, api:
        proc = subprocess.run(
            [str(gemini), *args],
            input="Write notes.txt saying hello.",
            cwd=Path(NOTES).parent,
            env=gemini_env(Path(tmp), api.url, attempts),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    (OUT / f"{name}.{ext}").write_text(proc.stdout)
    if "429" in name:
        (OUT / f"{name}.stderr.txt").write_text(proc.stderr)
    (OUT / f"{name}.served.json").write_text(json.dumps(served(api, turns), indent=1) + "\n")
    print(f"{name}: exit {proc.returncode}, {len(proc.stdout)} bytes")


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    gemini = _gemini()
    for name in names or list(CASES):
        capture(name, gemini)


if __name__ == "__main__":
    main(sys.argv[1:])
