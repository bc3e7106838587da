"""Every example in README.md and in docs/ is run, as written, by this file.

Each document is followed as a user follows it: top to bottom, in one fresh project. Fences say what a
block is: ```sh blocks are commands a user types (every line is run, in order), ```python blocks run
(in the project), ```toml blocks are loaded as a ``ralph.toml`` and written to the project as its
``ralph.toml`` (the configuration of the commands that follow), ```sql blocks run in DuckDB in the
dataset the document's commands exported, ```text blocks are output, diagrams or synopses (the outputs
of ``ralph-ledger run`` they show are checked against what it prints). A block with no kind fails the
test, and so does a command line that no journey here knows how to run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from tests.journeys.conftest import BIN, Project, Terminal, clean_env

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "design").glob("*.md"))]
"""Every document whose examples run here."""
SAMPLES = ROOT / "sample_sessions"
FENCE = re.compile(r"^```([\w-]*)\s*$")
KINDS = {"sh", "python", "toml", "sql", "text"}
STEERED = "fix-login"
"""The running loop the README's steering examples name: in the demo, a copy of a running sample."""

SETUP = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/ralph-tui --replay sample_sessions/"
)
TESTS = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,spark,browser]'"
    " && .venv/bin/python -m pytest"
)


def blocks(kind: str | None = None, doc: Path = README) -> Iterator[tuple[int, str, list[str]]]:
    """(line number, kind, lines) of each fenced block of ``doc`` (of ``kind`` only, if given)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
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


def where(doc: Path, line: int) -> str:
    return f"{doc.relative_to(ROOT)}:{line}"


def command(line: str) -> str:
    """A README command line without its trailing ``# comment``."""
    return re.sub(r"\s{2,}#.*$", "", line).strip()


def test_every_block_says_what_it_is() -> None:
    bad = [f"{where(d, n)}: ```{kind}" for d in DOCS for n, kind, _ in blocks(doc=d) if kind not in KINDS]
    assert not bad, f"fences must be one of {sorted(KINDS)}: {bad}"


def test_the_readme_opens_with_the_two_commands() -> None:
    first = [body for _, _, body in blocks()][:2]
    assert first == [[SETUP], [TESTS]]


def test_the_readme_is_a_landing_page_whose_links_resolve() -> None:
    """At most 200 lines; every relative link (an image, a page of the manual) names a file that exists."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    targets = [t for t in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text) if not t.startswith("http")]
    assert targets, "the README links to its manual"
    missing = [t for t in targets if not (ROOT / urllib.parse.unquote(t)).exists()]
    assert not missing, missing


def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert TESTS in (ROOT / ".ci" / "run").read_text().splitlines()


# --- the commands -------------------------------------------------------------------------------


CLAUDE = """\
import json, sys
args = sys.argv[1:]
if "-p" not in args:
    sys.exit("this stand-in only answers claude -p")
if "stream-json" in args and "--verbose" not in args:
    sys.exit("Error: When using --print, --output-format=stream-json requires --verbose")
prompt = sys.stdin.read()
text = "Done: " + prompt.strip().splitlines()[0] + "\\n<promise>COMPLETE</promise>"
name = "-".join("".join(c for c in w if c.isalnum()) for w in prompt.split()[:3]).lower()
with open(f"notes-{name}.md", "a") as notes:  # the work: a file of its task changed where it runs
    notes.write(text.splitlines()[0] + "\\n")
usage = {"input_tokens": 12, "output_tokens": 34, "cache_creation_input_tokens": 0,
         "cache_read_input_tokens": 0}
lines = [
    {"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5", "tools": []},
    {"type": "assistant", "session_id": "s-1", "message": {"id": "msg_1", "type": "message",
     "role": "assistant", "content": [{"type": "text", "text": text}], "usage": usage}},
    {"type": "result", "subtype": "success", "is_error": False, "result": text, "session_id": "s-1",
     "usage": usage, "num_turns": 1},
]
for line in lines:
    print(json.dumps(line), flush=True)
"""
"""A stand-in for the ``claude`` CLI in print mode: it answers the prompt on stdin in Claude Code's
stream-json format (refusing stream-json without ``--verbose``, as the real one does), adds a line to
a file named for its task where it runs, and promises."""


def renamed(journal: bytes, session: str) -> bytes:
    """A journal's lines as session ``session``'s, each linked again to the one before it (as its
    appends would have linked them: docs/design/hash-chain.md); its unfinished last line as it was."""
    from ledger import events as E
    from ledger.storage import chain

    body, _, tail = journal.rpartition(b"\n")
    out, prev = [], chain.START
    for line in body.split(b"\n"):
        event = E.decode(line)
        out.append(E.encode(msgspec.structs.replace(event, session_id=session, prev=prev)))
        prev = chain.link_of(out[-1][:-1])
    old = b'"session_id":"' + E.decode(body.split(b"\n")[0]).session_id.encode() + b'"'
    return b"".join(out) + tail.replace(old, f'"session_id":"{session}"'.encode())


class Demo(Project):
    """A fresh git project whose home holds the bundled sample sessions' journals, which are also in
    its ``sample_sessions/`` (as in a checkout of this project); ``claude`` on its PATH is a stand-in."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        for folder in (self.home / "journals", self.dir / "sample_sessions"):
            folder.mkdir(parents=True)
            for path in SAMPLES.glob("*.jsonl"):
                shutil.copy(path, folder / path.name)
        running = (SAMPLES / "torn-last-line.jsonl").read_bytes()
        (self.home / "journals" / f"{STEERED}.jsonl").write_bytes(renamed(running, STEERED))
        (self.dir / "test_app.py").write_text("def test_it_works() -> None:\n    assert True\n")
        self.user_home = root.parent / "user-home"
        self.user_home.mkdir(exist_ok=True)
        self.bin = root.parent / "bin"
        self.bin.mkdir(exist_ok=True)
        claude = self.bin / "claude"
        claude.write_text(f"#!{sys.executable}\n{CLAUDE}")
        claude.chmod(0o755)

    def env(self) -> dict[str, str]:
        """A user's shell: this venv's scripts and ``claude`` on PATH, their own ``$HOME``."""
        env = clean_env(HOME=str(self.user_home))
        for who in ("AUTHOR", "COMMITTER"):  # a user's git knows who they are
            env[f"GIT_{who}_NAME"], env[f"GIT_{who}_EMAIL"] = "Demo User", "demo@example.com"
        env["PATH"] = f"{self.bin}:{BIN}:{env.get('PATH', '')}"
        return env


def rewrite(line: str, demo: Demo, tmp: Path) -> str:
    """A README line with the places that stand for the user's own made real: ``/shared/ralph`` (a
    shared folder) in ``tmp``, ``DIR`` (a home) as the demo's home."""
    line = line.replace("/shared/ralph", f"{tmp}/shared/ralph")
    return re.sub(r"--home DIR\b", f"--home {demo.home}", line)


def run_tui(demo: Demo, line: str) -> None:
    """Run a ``ralph-tui`` line in a pseudo-terminal until it shows its sessions table, then ``q``."""
    for word in shlex.split(line)[1:]:
        if word.startswith("~/"):  # homes named in the example: give them one session each
            journals = demo.user_home / word[2:] / "journals"
            journals.mkdir(parents=True, exist_ok=True)
            shutil.copy(SAMPLES / "tdd-success.jsonl", journals)
    words = shlex.split(line)
    if "--dataset" in words:  # the dataset named: one home's export in it
        home = demo.user_home / "exported" / ".ralph"
        (home / "journals").mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLES / "tdd-success.jsonl", home / "journals")
        dataset = words[words.index("--dataset") + 1]
        export = [str(BIN / "ralph-ledger"), "--home", str(home), "export", "--parquet", dataset]
        assert subprocess.run(export, capture_output=True, env=demo.env(), timeout=120).returncode == 0
    if "--serve" in shlex.split(line):
        serve_then_stop(demo, line)
        return
    show_then_quit(["bash", "-c", line], demo.dir, demo.env(), "status")


def serve_then_stop(demo: Demo, line: str) -> None:
    """``ralph-tui --serve ...`` (on a free port, not the default one another program may hold) says
    where it serves, its page answers there (at the address with its token), and Ctrl-C stops it
    with 130."""
    from tests.journeys.test_tui_serve import free_port, served_address

    port = free_port()
    term = Terminal(["bash", "-c", f"{line} --port {port}"], cwd=demo.dir, env=demo.env())
    try:
        said = f"ralph-tui: serving on http://127.0.0.1:{port}/?token="
        screen = term.wait_for(lambda screen: said in screen and "Ctrl-C stops" in screen, 30)
        page = urllib.request.urlopen(served_address(screen), timeout=10).read().decode()
        assert "ralph-tui" in page and "/ws" in page, page
        term.press("C-c")
        assert term.exit_code(15) == 130, term.screen()
    finally:
        term.close()


def watch_then_stop(demo: Demo, line: str) -> None:
    """A command that goes on until Ctrl-C (``export --watch``): it does its first round, then Ctrl-C
    stops it with 130."""
    term = Terminal(["bash", "-c", line], cwd=demo.dir, env=demo.env())
    try:
        term.wait_for("export: ", 60)
        term.press("C-c")
        assert term.exit_code(15) == 130, term.screen()
    finally:
        term.close()


def show_then_quit(argv: list[str], cwd: Path, env: dict[str, str], shows: str) -> None:
    """``ralph-tui`` in a terminal shows ``shows``; ``q`` quits it with 0."""
    term = Terminal(argv, cwd=cwd, env=env)
    try:
        term.wait_for(shows, 30)
        term.press("q")
        assert term.exit_code(15) == 0, term.screen()
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
    env = clean_env(CLAUDE_PROJECT_DIR=str(demo.dir))  # Claude Code's environment: not the venv's PATH
    proc = subprocess.run(
        ["bash", "-c", hook], input=json.dumps(stdin), capture_output=True, text=True, cwd=demo.dir,
        env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert '"decision"' not in proc.stdout, proc.stdout  # the promise ends the loop: the stop is allowed


def claude_mcp_add(demo: Demo, line: str) -> None:
    """``claude mcp add --scope project NAME -- COMMAND ARGS``: the entry ``init claude-code --agent``
    writes in ``.mcp.json``, and a command that, run in the project, answers MCP's ``tools/list``."""
    from ledger.drivers.claude_code.install.agent_def import SERVER, server_entry

    words = shlex.split(line)
    split = words.index("--")
    assert words[words.index("--scope") + 1] == "project" and words[split - 1] == SERVER, line
    command = words[split + 1 :]
    assert {"type": "stdio", "command": Path(command[0]).name, "args": command[1:]} == server_entry(), line
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    calls = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc = subprocess.Popen(
        ["bash", "-c", shlex.join(command)], cwd=demo.dir, env=demo.env(), text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(c) + "\n" for c in calls))
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert len(answers[1]["result"]["tools"]) == 13


def run_line(demo: Demo, tmp: Path, line: str) -> None:
    """Run one README command line in ``demo`` as a user's shell would, and check it worked."""
    if line == "claude":  # Claude Code itself: one turn that ends with the promise the loop asked for
        claude_stop(demo, "All tests pass now.\n<promise>ALL GREEN</promise>")
        return
    if line.startswith("claude mcp add"):
        claude_mcp_add(demo, line)
        return
    line = rewrite(line, demo, tmp)
    if line.startswith("ralph-tui"):
        run_tui(demo, line)
        return
    if "--watch" in shlex.split(line):
        watch_then_stop(demo, line)
        return
    cwd = demo.dir
    if line.startswith(".venv/bin/python -m pytest") and "--long" in line:  # the long form takes many
        line, cwd = line + " --collect-only", ROOT  # minutes: check it is a valid run of those suites
    proc = subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=300, env=demo.env()
    )
    assert proc.returncode == 0, f"{line}\n{proc.stdout}{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


SPECIAL = {SETUP, TESTS}
"""Lines run by their own tests below."""


def run_python(demo: Demo, tmp: Path, body: list[str], at: str) -> None:
    """A ```python block, run in the project (``/shared/ralph`` made real as for commands)."""
    code = "\n".join(rewrite(line, demo, tmp) for line in body)
    if "pyspark" in code:
        pytest.importorskip("pyspark")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=demo.dir,
        capture_output=True,
        text=True,
        env=demo.env(),
        timeout=300,
    )
    assert proc.returncode == 0, f"{at}\n{proc.stderr}"


def run_sql(demo: Demo, tmp: Path, body: list[str], at: str) -> None:
    """A ```sql block, run by DuckDB in the dataset the document exported to ``/shared/ralph``."""
    import duckdb

    dataset = tmp / "shared" / "ralph"
    assert dataset.is_dir(), f"{at}: no dataset exported before this block"
    code = f"import duckdb, os, sys; os.chdir({str(dataset)!r}); duckdb.connect().execute(sys.stdin.read())"
    proc = subprocess.run(
        [sys.executable, "-c", code], input="\n".join(body), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"{at}\n{proc.stderr}"
    assert duckdb  # (the reader's DuckDB: the one the ledger uses)


def load_toml(demo: Demo, body: list[str], at: str) -> None:
    """A ```toml block: a valid ``ralph.toml``, the project's from here on."""
    from ledger.loop.config.loop_config import LoopConfig, find_config

    (demo.dir / "ralph.toml").write_text("\n".join(body) + "\n")
    assert find_config(demo.dir) != LoopConfig(), f"{at}: read as the defaults"


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_example_runs_as_written(doc: Path, tmp_path: Path) -> None:
    """The document's examples, top to bottom, in one fresh project, as a reader follows them."""
    demo = Demo(tmp_path / "demo")
    for start, kind, body in blocks(doc=doc):
        at = where(doc, start)
        if kind == "sh":
            for line in (command(x) for x in body if x.strip()):
                if line not in SPECIAL:
                    run_line(demo, tmp_path, line)
        elif kind == "python":
            run_python(demo, tmp_path, body, at)
        elif kind == "toml":
            load_toml(demo, body, at)
        elif kind == "sql":
            run_sql(demo, tmp_path, body, at)


# --- the outputs -------------------------------------------------------------------------------


AGENT = """\
import pathlib, sys
state = pathlib.Path(sys.argv[1])
n = len(list(state.iterdir())) + 1
(state / f"prompt{n}.txt").write_text(sys.stdin.read())
"""
"""An agent that keeps the prompt of each of its runs in ``STATE/prompt<n>.txt`` and never promises."""

RUN_OUTPUTS = {
    "unknown hook 'defualt'": "hooks = ['defualt']\n",
    "timeout_s: expected a number, got 'soon'": (
        "[[rules]]\nname = 'tests'\ntype = 'command'\nargv = ['true']\ntimeout_s = 'soon'\n"
    ),
}
"""The ``ralph.toml`` behind each error line the README shows for ``ralph-ledger run``."""


def text_blocks(*marks: str) -> list[tuple[str, list[str]]]:
    """(where, lines) of the ```text blocks of every document holding any of ``marks``."""
    return [
        (where(d, n), body)
        for d in DOCS
        for n, _, body in blocks("text", d)
        if any(m in line for line in body for m in marks)
    ]


def test_readme_configuration_errors_are_what_run_prints(project: Project, tmp_path: Path) -> None:
    """Each one-line configuration error the README shows is the line ``ralph-ledger run`` prints for
    that configuration (with the real path where the README writes ``/path``)."""
    shown = text_blocks("ralph.toml: ")
    assert len(shown) == len(RUN_OUTPUTS), shown
    project.write("PROMPT.md", "Make the tests pass.\n")
    for start, body in shown:
        (line,) = body
        (config,) = [toml for mark, toml in RUN_OUTPUTS.items() if mark in line]
        project.write("ralph.toml", config)
        proc = project.cli("run", "--prompt", "PROMPT.md", "--", "true")
        assert proc.returncode == 1, proc
        printed = proc.stderr.strip().replace(str(project.dir), "/path")
        assert printed.endswith(line), f"{start}: {line}\nprinted: {printed}"


def test_readme_prompt_example_is_what_the_agent_gets(project: Project, tmp_path: Path) -> None:
    """The README's second prompt of a loop whose tests fail is, byte for byte, what the runner feeds
    the agent with the default hook and a ``tests`` rule that prints ``2 failed``."""
    ((start, body),) = text_blocks("Feedback from iteration")
    project.write("PROMPT.md", body[0] + "\n")
    rule = [sys.executable, "-c", "print('2 failed'); raise SystemExit(1)"]
    project.write(
        "ralph.toml", f"hooks = ['default']\n[[rules]]\nname = 'tests'\ntype = 'command'\nargv = {rule!r}\n"
    )
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "agent.py").write_text(AGENT)
    agent = [sys.executable, str(tmp_path / "agent.py"), str(state)]
    proc = project.cli("run", "--max-iterations", "2", "--prompt", "PROMPT.md", "--", *agent)
    assert proc.returncode == 4, proc
    assert (state / "prompt2.txt").read_text() == "\n".join(body), start


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
    show_then_quit(shlex.split(run), tree, clean_env(), "running")
