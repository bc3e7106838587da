"""Captures of real opencode and Copilot output against the chat completions mock, saved as fixtures
(``tests/fixtures/clients/<client>-<version>/``) that ``tests/unit/test_captures_*.py`` replay.

    .venv/bin/python -m tests.clients.capture_chat

runs each case once, in ``WORK`` (a fixed folder, so the paths in the captures stay the same), and
writes its stdout (``CASE.jsonl`` or ``CASE.stdout``) and stderr (``CASE.stderr``). ``CASES`` is
what the mock served to each; the replaying tests compute their expected numbers from it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

from tests.clients.mocks.base import Reply, Script, ToolCall, Turn, Usage
from tests.clients.mocks.chat import MODEL, ChatAPI, rate_limited

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "clients"
OPENCODE = FIXTURES / "opencode-1.18.33"
COPILOT = FIXTURES / "copilot-1.0.102"
WORK: Final = Path("/tmp/ralph-ledger-capture/work")
"""Where every case runs (a fresh git repository each time)."""

PROMISE_TAG = "<promise>COMPLETE</promise>"
PROMPT = "Write notes.txt, then say CONTINUE; say <promise>COMPLETE</promise> only when all is done.\n"


def tools_turns(edit: ToolCall) -> list[Turn]:
    """Commentary, reasoning and a command naming the promise, an edit and a command; then the answer."""
    return [
        Reply(
            text="I will write notes.txt; <promise>COMPLETE</promise> comes at the very end.",
            thinking="The user wants <promise>COMPLETE</promise> later.",
            tool_calls=(edit, ToolCall("bash", {"command": f"echo '{PROMISE_TAG}'", "description": "echo"})),
            usage=Usage(input=1200, output=40, cache_read=300, thoughts=12),
        ),
        Reply(
            text="notes.txt is written; more to do. CONTINUE",
            usage=Usage(input=90, output=11, cache_read=1500, thoughts=3),
        ),
    ]


OPENCODE_TOOLS = tools_turns(ToolCall("write", {"filePath": "notes.txt", "content": "first note\n"}))
COPILOT_TOOLS = tools_turns(
    ToolCall("create", {"path": str(WORK / "notes.txt"), "file_text": "first note\n"})
)
LIMITED: list[Turn] = [rate_limited(1)] * 6

CASES: Final[dict[str, tuple[Path, list[str], list[Turn], str]]] = {
    # name: (folder, the command after the program, the turns served, stdout's extension)
    "run-json-tools": (OPENCODE, ["run", "--format", "json", "-m", f"mock/{MODEL}"], OPENCODE_TOOLS, "jsonl"),
    "run-plain-tools": (OPENCODE, ["run", "-m", f"mock/{MODEL}"], OPENCODE_TOOLS, "stdout"),
    "run-json-429": (OPENCODE, ["run", "--format", "json", "-m", f"mock/{MODEL}"], LIMITED, "jsonl"),
    "json-tools": (COPILOT, ["--allow-all-tools", "--output-format", "json"], COPILOT_TOOLS, "jsonl"),
    "text-tools": (COPILOT, ["--allow-all-tools"], COPILOT_TOOLS, "stdout"),
    "json-429": (COPILOT, ["--allow-all-tools", "--output-format", "json"], LIMITED, "jsonl"),
    "text-429": (COPILOT, ["--allow-all-tools"], LIMITED, "stdout"),
}


def capture(name: str, bin_dir: Path) -> None:
    """Run case ``name`` once and write its output next to the others."""
    from tests.clients.test_copilot_run import copilot_env
    from tests.clients.test_opencode_run import opencode_env

    folder, args, turns, ext = CASES[name]
    shutil.rmtree(WORK.parent, ignore_errors=True)
    WORK.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=WORK, check=True)
    with ChatAPI(Script(turns)) as api:
        make = opencode_env if folder == OPENCODE else copilot_env
        env = {**make(WORK.parent, api, bin_dir), "PWD": str(WORK)}
        program = "opencode" if folder == OPENCODE else "copilot"
        done = subprocess.run(
            [program, *args], input=PROMPT, cwd=WORK, env=env, capture_output=True, text=True, timeout=120
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.{ext}").write_text(done.stdout)
    (folder / f"{name}.stderr").write_text(done.stderr)
    print(f"{name}: exit {done.returncode}, {len(api.served)} turns served")


USAGE_CONTINUE: list[Turn] = [
    Reply(text="First answer.", usage=Usage(input=100, output=5, cache_read=10, thoughts=2)),
    Reply(text="Second answer.", usage=Usage(input=7, output=3, cache_read=120)),
]
USAGE_ANTHROPIC: list[Turn] = [
    Reply(text="Cached.", usage=Usage(input=100, output=5, cache_read=10, cache_write=1000)),
]
ANTHROPIC_MODEL = "claude-sonnet-4-5"

USAGE_CASES: Final[dict[str, tuple[list[Turn], list[list[str]], bool]]] = {
    # name: (the turns served, the extra arguments of each run, whether Copilot's provider is Anthropic)
    "usage-tools": (COPILOT_TOOLS, [[]], False),
    "usage-429": (LIMITED, [[]], False),
    "usage-continue": (USAGE_CONTINUE, [[], ["--continue"]], False),
    "usage-anthropic": (USAGE_ANTHROPIC, [[]], True),
}
"""Copilot's ``--usage-output-file``: each run of a case (``--output-format json``) writes its file
to ``NAME.usage.json`` (``NAME-2.usage.json`` for a second run) and its stdout to ``NAME.jsonl``
(``NAME-2.jsonl``)."""


def capture_usage(name: str, bin_dir: Path) -> None:
    """Run usage case ``name`` (each of its runs in turn, in one home) and keep its usage files."""
    from tests.clients.mocks.anthropic import AnthropicAPI
    from tests.clients.test_copilot_run import copilot_env

    turns, runs, anthropic = USAGE_CASES[name]
    shutil.rmtree(WORK.parent, ignore_errors=True)
    WORK.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=WORK, check=True)
    with (AnthropicAPI if anthropic else ChatAPI)(Script(turns)) as api:
        env = {**copilot_env(WORK.parent, api, bin_dir), "PWD": str(WORK)}  # type: ignore[arg-type]
        if anthropic:
            env |= {"COPILOT_PROVIDER_TYPE": "anthropic", "COPILOT_PROVIDER_BASE_URL": api.url}
            env["COPILOT_MODEL"] = ANTHROPIC_MODEL
        for i, extra in enumerate(runs, 1):
            stem = name if i == 1 else f"{name}-{i}"
            usage = WORK.parent / f"{stem}.usage.json"
            argv = [
                "copilot",
                "--allow-all-tools",
                "--output-format",
                "json",
                "--usage-output-file",
                str(usage),
            ]
            done = subprocess.run(
                [*argv, *extra], input=PROMPT, cwd=WORK, env=env, capture_output=True, text=True, timeout=120
            )
            (COPILOT / f"{stem}.jsonl").write_text(done.stdout)
            shutil.copyfile(usage, COPILOT / f"{stem}.usage.json")
            print(f"{stem}: exit {done.returncode}, {len(api.served)} turns served so far")


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.clients.conftest import installed_bin

    bin_dir = installed_bin()
    for name in sys.argv[1:] or [*CASES, *USAGE_CASES]:
        if name in USAGE_CASES:
            capture_usage(name, bin_dir)
        else:
            capture(name, bin_dir)


if __name__ == "__main__":
    main()
