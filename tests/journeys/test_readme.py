"""Every example in README.md is run, as written, by this file.

Fences say what a block is: ```sh blocks are commands a user types (every line is run here, in order,
in one fresh project per block), ```python blocks run, ```toml blocks are loaded as a ``ralph.toml``,
```text blocks are output, diagrams or synopses. A block with no kind fails the test, and so does a
command line that no journey here knows how to run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journeys.conftest import BIN, Project, Terminal, clean_env, script

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SAMPLES = ROOT / "sample_sessions"
FENCE = re.compile(r"^```([\w-]*)\s*$")
KINDS = {"sh", "python", "toml", "text"}

SETUP = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/ralph-tui --replay sample_sessions/"
)
TESTS = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"


def blocks(kind: str | None = None) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, kind, lines) of each fenced block of README.md (of ``kind`` only, if given)."""
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, found = i + 1, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if kind is None or found == kind:
            yield start, found, lines[i + 1 : j]
        i = j + 1


def command(line: str) -> str:
    """A README command line without its trailing ``# comment``."""
    return re.sub(r"\s{2,}#.*$", "", line).strip()


def sh_blocks() -> list[tuple[int, list[str]]]:
    """(line number, command lines) of each ```sh block."""
    return [(n, [command(x) for x in body if x.strip()]) for n, _, body in blocks("sh")]


def test_every_block_says_what_it_is() -> None:
    bad = [f"README.md:{n}: ```{kind}" for n, kind, _ in blocks() if kind not in KINDS]
    assert not bad, f"fences must be one of {sorted(KINDS)}: {bad}"


def test_the_readme_opens_with_the_two_commands() -> None:
    first = [body for _, _, body in blocks()][:2]
    assert first == [[SETUP], [TESTS]]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert TESTS in (ROOT / ".ci" / "run").read_text().splitlines()


# --- the commands -------------------------------------------------------------------------------


class Demo(Project):
    """A fresh git project whose home holds the bundled sample sessions' journals, which are also in
    its ``sample_sessions/`` (as in a checkout of this project)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        for folder in (self.home / "journals", self.dir / "sample_sessions"):
            folder.mkdir(parents=True)
            for path in SAMPLES.glob("*.jsonl"):
                shutil.copy(path, folder / path.name)
        self.user_home = root.parent / "user-home"
        self.user_home.mkdir(exist_ok=True)

    def env(self) -> dict[str, str]:
        """A user's environment: their own ``$HOME`` (for ``~`` in the examples)."""
        return clean_env(HOME=str(self.user_home))


REWRITES = {"/shared/ralph": "{tmp}/shared/ralph"}
"""Paths of the examples that stand for the user's own places, and where this file puts them."""


def argv_of(line: str, tmp: Path, user_home: Path) -> list[str]:
    """The argv of a README command line: its own program from this venv, paths as in REWRITES."""
    for old, new in REWRITES.items():
        line = line.replace(old, new.format(tmp=tmp))
    words = shlex.split(line)
    words = [str(user_home) + w[1:] if w.startswith("~/") else w for w in words]
    if words[0] in ("ralph-ledger", "ralph-tui"):
        words[0] = script(words[0])
    elif words[0].startswith(".venv/bin/"):
        words[0] = str(BIN / words[0].removeprefix(".venv/bin/"))
    return words


def run_tui(demo: Demo, argv: list[str]) -> None:
    """Run ``ralph-tui`` in a pseudo-terminal until it shows its sessions table, then quit with ``q``."""
    for word in argv[1:]:
        if word.startswith(str(demo.user_home)):
            Path(word, "journals").mkdir(parents=True, exist_ok=True)
    term = Terminal(argv, cwd=demo.dir, env=demo.env())
    try:
        term.wait_for("status", 30)
        term.send("q")
        assert term.wait(15) == 0, term.text()
    finally:
        term.close()


def claude_stop(demo: Demo, text: str) -> None:
    """What ``claude`` does at the end of a turn: run the installed Stop hook with the stop's JSON."""
    settings = json.loads((demo.dir / ".claude" / "settings.json").read_text())
    hook = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    transcript = demo.dir.parent / "transcript.jsonl"
    message = {"role": "assistant", "id": "msg_1", "content": [{"type": "text", "text": text}]}
    line = {"type": "assistant", "sessionId": "c1", "uuid": "u1", "message": message}
    transcript.write_text(json.dumps(line) + "\n")
    stdin = {
        "session_id": "c1",
        "transcript_path": str(transcript),
        "cwd": str(demo.dir),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": text,
    }
    proc = subprocess.run(
        shlex.split(hook), input=json.dumps(stdin), capture_output=True, text=True, cwd=demo.dir,
        env=clean_env(CLAUDE_PROJECT_DIR=str(demo.dir)), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def run_line(demo: Demo, tmp: Path, line: str) -> None:
    """Run one README command line in ``demo`` as a user would, and check it worked."""
    if line == "claude":  # Claude Code itself: one turn that ends with the promise the loop asked for
        claude_stop(demo, "All tests pass now.\n<promise>ALL GREEN</promise>")
        return
    argv = argv_of(line, tmp, demo.user_home)
    if Path(argv[0]).name == "ralph-tui":
        run_tui(demo, argv)
        return
    if Path(argv[0]).name == "python" and "--long" in argv:  # the long form takes many minutes:
        argv.append("--collect-only")  # check that the line is a valid run of those suites
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, env=demo.env())
        assert proc.returncode == 0 and "tests collected" in proc.stdout, proc.stdout + proc.stderr
        return
    proc = subprocess.run(argv, cwd=demo.dir, capture_output=True, text=True, timeout=120, env=demo.env())
    assert proc.returncode == 0, f"{line}\n{proc.stdout}{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


SPECIAL = {SETUP, TESTS}
"""Lines run by their own tests below."""


@pytest.mark.parametrize(("start", "lines"), sh_blocks(), ids=[f"line{n}" for n, _ in sh_blocks()])
def test_readme_commands(start: int, lines: list[str], tmp_path: Path) -> None:
    demo = Demo(tmp_path / "demo")
    for line in lines:
        if line not in SPECIAL:
            run_line(demo, tmp_path, line)


def test_readme_python_examples(tmp_path: Path) -> None:
    for start, _, body in blocks("python"):
        proc = subprocess.run(
            [sys.executable, "-c", "\n".join(body)], cwd=tmp_path, capture_output=True, text=True,
            env=clean_env(), timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, f"README.md:{start}\n{proc.stderr}"


def test_readme_toml_examples(tmp_path: Path) -> None:
    from ledger.config import LoopConfig, find_config

    for start, _, body in blocks("toml"):
        (tmp_path / "ralph.toml").write_text("\n".join(body) + "\n")
        assert find_config(tmp_path) != LoopConfig(), f"README.md:{start}: read as the defaults"


def test_first_command_on_a_fresh_checkout(tmp_path: Path) -> None:
    """The README's first command, as written, in a fresh copy of the project: it sets up a venv and
    shows the sample sessions in ``ralph-tui``; ``q`` quits."""
    tree = tmp_path / "checkout"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    setup, _, run = SETUP.rpartition(" && ")
    proc = subprocess.run(["bash", "-c", setup], cwd=tree, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    term = Terminal(shlex.split(run), cwd=tree, env=clean_env())
    try:
        term.wait_for("running", 30)
        term.send("q")
        assert term.wait(15) == 0
    finally:
        term.close()
