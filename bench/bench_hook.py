"""Whole-process cost of the Claude Code Stop hook on a 3 MB transcript, in one table.

    .venv/bin/python bench/bench_hook.py [--runs 30] [--far 100] [--official PATH] [--editable]

What it measures, and how: docs/performance.md (How the benches measure).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tables import markdown_table, parse_with_smoke  # bench/tables.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_NAME = Path("fixtures") / "claude-code" / "ccv-fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
DROP_IN_RATIO = 1.5  # x python3 -c pass
NATIVE_MS = 150.0
GROWTH = 1.2  # stop 100 / stop 2
SESSION = "bench-session"
FAR = 100
"""The stop the far rows start at (``--far``)."""
CHAIN_RATIO = 1.1
"""A warm ledger-native stop with the hash chain on: at most this times the same stop with it off."""
CHAIN_OFF = """\
# bench_hook.py: the journals of this process do not link their events (ledger.storage.chain.LINKING
# set off as the module is first imported; nothing is imported here before it is needed).
import sys


class _ChainOff:
    def find_spec(self, name, path=None, target=None):
        if name != "ledger.storage.chain":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.LINKING = False

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _ChainOff())
"""
"""A ``sitecustomize`` that turns the chain off in the hook and its warm worker (no user switch)."""


def chain_off(tmp: Path) -> dict[str, str]:
    """The environment that runs a hook (and the warm worker it starts) with the chain off."""
    folder = tmp / "chain-off"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(CHAIN_OFF)
    return {"PYTHONPATH": str(folder)}


def fixture() -> Path:
    """The largest real Claude Code transcript of ``tests/fixtures/claude-code/``."""
    return ROOT / "tests" / FIXTURE_NAME


def compact(value: object) -> str:
    """One transcript line as Claude Code writes it: JSON without spaces (the official hook greps
    for ``"role":"assistant"``)."""
    return json.dumps(value, separators=(",", ":"))


def build_transcript(path: Path, size: int = 3_000_000) -> None:
    """A transcript of about ``size`` bytes: the largest fixture repeated with fresh message ids."""
    lines = fixture().read_text().splitlines()
    written, copy = 0, 0
    with path.open("w") as out:
        while written < size:
            for raw in lines:
                line = json.loads(raw)
                msg = line.get("message")
                if isinstance(msg, dict) and msg.get("id"):
                    msg["id"] = f"{msg['id']}-{copy}"
                text = compact(line) + "\n"
                out.write(text)
                written += len(text)
            copy += 1


def turn_text(n: int) -> str:
    """The text of turn ``n``'s last message: the stop's ``last_assistant_message``."""
    return f"Iteration {n}: edited file_{n}.py, tests still failing."


def add_turn(path: Path, n: int) -> None:
    """One more prompt and answer, as Claude Code 2.1.x appends them between two stops: an Edit call
    (progress: Claude Code's block cap counts blocks in a row without one), its result, and the
    final text, which the stop's ``last_assistant_message`` repeats (so the stop finds its turn at
    once, as a warm stop does: docs/design/claude-code-stop.md)."""
    edit = {"type": "tool_use", "id": f"toolu-{n}", "name": "Edit", "input": {"file_path": f"file_{n}.py"}}
    result = {"type": "tool_result", "tool_use_id": f"toolu-{n}", "content": "ok"}
    usage = {"input_tokens": 10, "output_tokens": 5}
    rows = [
        {"type": "user", "message": {"role": "user", "content": f"continue {n}"}},
        {
            "type": "assistant",
            "message": {
                "id": f"msg-bench-{n}a",
                "role": "assistant",
                "content": [edit],
                "usage": usage,
                "stop_reason": "tool_use",
            },
        },
        {"type": "user", "message": {"role": "user", "content": [result]}},
        {
            "type": "assistant",
            "message": {
                "id": f"msg-bench-{n}",
                "role": "assistant",
                "content": [{"type": "text", "text": turn_text(n)}],
                "usage": usage,
                "stop_reason": "end_turn",
            },
        },
    ]
    with path.open("a") as f:
        f.writelines(compact(r) + "\n" for r in rows)


class Sample(float):
    """The wall time (ms) of one measured process, with its CPU time (ms) as ``cpu`` and, for a stop
    served warm, the worker's CPU time meanwhile as ``worker``."""

    cpu: float = 0.0
    worker: float = 0.0


def process_cpu(pid: int) -> float:
    """The CPU time (ms) process ``pid`` has used, all its threads (DuckDB runs queries on several),
    from ``/proc/PID/task/*/schedstat`` (nanoseconds); 0 when it cannot be read."""
    total = 0
    with contextlib.suppress(OSError, ValueError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                total += int(Path(task.path, "schedstat").read_text().split()[0])
    return total / 1e6


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (used.ru_utime + used.ru_stime) * 1000


def timed(
    cmd: list[str], stdin: bytes | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[Sample, subprocess.CompletedProcess[bytes]]:
    """The times of one process, and the process."""
    t, c = time.perf_counter(), _cpu()
    proc = subprocess.run(cmd, input=stdin, capture_output=True, cwd=cwd, env=env, check=False)
    ms = Sample((time.perf_counter() - t) * 1000)
    ms.cpu = _cpu() - c
    return ms, proc


BIN = [Path(sys.executable).parent]
"""The folder of the ``ralph-ledger`` script and Python the hooks run (:func:`installed`, unless
``--editable``)."""

SCRIPT = """import re
import sys
from ledger.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
"""The ``ralph-ledger`` script, as pip writes a console script."""


def installed(tmp: Path) -> Path:
    """The ``bin`` folder of a Python laid out as a regular (not editable) install of this checkout
    is: a virtual environment whose ``site-packages`` names this checkout and this environment's
    ``site-packages`` as plain paths (a ``.pth`` of paths imports nothing), with a ``ralph-ledger``
    script as pip writes it. The editable install of a checkout's ``.venv`` imports setuptools'
    import finder (pathlib, re, urllib.parse, ipaddress, ...) at every Python start: ~15 ms of
    each hook process that an installed ralph-ledger does not spend (``--editable`` measures it)."""
    venv = tmp / "installed"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "ralph_ledger.pth").write_text("\n".join([str(ROOT), *deps]) + "\n")
    script = venv / "bin" / "ralph-ledger"
    script.write_text(f"#!{venv / 'bin' / 'python'}\n{SCRIPT}")
    script.chmod(0o755)
    return venv / "bin"


class Project:
    """A project with a 3 MB transcript whose stops the hook answers."""

    def __init__(self, root: Path, transcript: Path, session: str = SESSION) -> None:
        self.root = root
        self.transcript = transcript
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / ".claude").mkdir(exist_ok=True)
        self.env = {
            "PATH": str(BIN[0]) + os.pathsep + "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"),
            "RALPH_HOME": str(root / ".ralph"),
            "RALPH_WARM": "0",  # in-process; the warm rows (the default) set 1
        }
        self.session = session
        self.stops = 0

    def event(self) -> bytes:
        """The Stop input of the current stop, as Claude Code 2.1.x sends it."""
        return json.dumps(
            {
                "session_id": self.session,
                "transcript_path": str(self.transcript),
                "cwd": str(self.root),
                "hook_event_name": "Stop",
                "stop_hook_active": True,
                "last_assistant_message": turn_text(self.stops),
                "background_tasks": [],
                "session_crons": [],
            }
        ).encode()

    def command(self) -> list[str]:
        """The hook's command line: ``ralph-ledger hook claude-code`` of this installation."""
        return [str(BIN[0] / "ralph-ledger"), "hook", "claude-code"]

    def stop(self) -> Sample:
        """One stop after one more turn; its time in ms. Raises SystemExit unless the hook blocks."""
        self.stops += 1
        add_turn(self.transcript, self.stops)
        worker = self.worker_pid()
        before = process_cpu(worker) if worker else 0.0
        ms, proc = timed(self.command(), self.event(), self.root, self.env)
        ms.worker = process_cpu(worker) - before if worker else 0.0
        if proc.returncode != 0 or b'"block"' not in proc.stdout:
            raise SystemExit(
                f"{self.root}: stop {self.stops} did not block: rc={proc.returncode} "
                f"stdout={proc.stdout.decode()[:200]!r} stderr={proc.stderr.decode()[:300]!r}"
            )
        return ms

    def worker_pid(self) -> int:
        """The pid of the home's warm worker (0 when none is running)."""
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.root / ".ralph" / "stop-worker.lock").read_text())
            os.kill(pid, 0)
            return pid
        return 0


STATE = (
    "---\nactive: true\niteration: 1\nsession_id: \nmax_iterations: 0\n"
    'completion_promise: "ALL DONE"\nstarted_at: "2026-11-22T00:00:00Z"\n---\n\nFix the tests\n'
)
"""The ``ralph-loop`` plugin's state file, as its setup script writes it."""


def drop_in(tmp: Path, name: str, transcript: Path) -> Project:
    p = Project(tmp / name, transcript)
    (p.root / ".claude" / "ralph-loop.local.md").write_text(STATE)
    return p


PLUGIN_HOOK = Path(".claude/plugins")
"""Where Claude Code installs plugins, under the home: the official hook is searched there, as
``**/ralph-loop/hooks/stop-hook.sh``."""
OFFICIAL_ENV = "RALPH_OFFICIAL_STOP_HOOK"


def official_hook(given: str | None) -> Path | None:
    """The official ``ralph-loop`` plugin's Stop hook, its shell script (not part of this repository,
    and not copied into it): ``--official``, else ``$RALPH_OFFICIAL_STOP_HOOK``, else the first
    ``ralph-loop/hooks/stop-hook.sh`` under ``~/.claude/plugins`` (where Claude Code installs the
    plugin); None when there is none, or no ``bash`` or ``jq`` to run it."""
    if shutil.which("bash") is None or shutil.which("jq") is None:
        return None
    for named in (given, os.environ.get(OFFICIAL_ENV)):
        if named:
            path = Path(named).expanduser()
            if not path.is_file():
                raise SystemExit(f"the official Stop hook is not at {path}")
            return path
    found = sorted((Path.home() / PLUGIN_HOOK).glob("**/ralph-loop/hooks/stop-hook.sh"))
    return found[0] if found else None


class Official(Project):
    """A drop-in loop whose stops the official plugin's shell hook answers: the baseline."""

    def __init__(self, root: Path, transcript: Path, hook: Path) -> None:
        super().__init__(root, transcript)
        self.hook = hook
        (self.root / ".claude" / "ralph-loop.local.md").write_text(STATE)

    def command(self) -> list[str]:
        return ["bash", str(self.hook)]


class Beside:
    """The baselines run after each measured stop, under the same load: ``python3 -c pass`` and,
    when it is found, one stop of the official hook on a loop of its own (as long a transcript)."""

    def __init__(self, tmp: Path, master: Path, name: str, hook: Path | None) -> None:
        self.bare: list[Sample] = []
        self.official: list[Sample] = []
        self.loop = None
        if hook is not None:
            self.loop = Official(
                tmp / f"official-{name}", transcript_copy(master, tmp / f"official-{name}.jsonl"), hook
            )
            self.loop.stop()  # the first stop claims the loop for the session

    def run(self) -> None:
        self.bare += bench_cmd("pass", 1)
        if self.loop is not None:
            self.official.append(self.loop.stop())


def native(tmp: Path, name: str, transcript: Path, far: int) -> Project:
    p = Project(tmp / name, transcript)
    (p.root / "ralph.toml").write_text(f"max_iterations = {far + 1000}\n")
    loop = {"prompt": "Fix the tests", "started_at": "2026-11-22T00:00:00Z"}
    (p.root / ".claude" / "ralph-ledger.local.json").write_text(json.dumps(loop))
    return p


def transcript_copy(master: Path, path: Path) -> Path:
    path.write_bytes(master.read_bytes())
    return path


def bench_drop_in(
    tmp: Path, master: Path, runs: int, warm: bool, hook: Path | None
) -> tuple[list[Sample], Beside]:
    """``runs`` stops of one drop-in loop after its first (``warm``: with RALPH_WARM=1), and the
    baselines run after each one (:class:`Beside`)."""
    kind = "drop-in-warm" if warm else "drop-in"
    p = drop_in(tmp, kind, transcript_copy(master, tmp / f"{kind}.jsonl"))
    if warm:
        p.env["RALPH_WARM"] = "1"
    p.stop()  # the first stop reads the whole transcript once; later stops read the new turn
    try:
        if warm:
            worker_up(p)
        times: list[Sample] = []
        beside = Beside(tmp, master, kind, hook)
        for _ in range(runs):
            times.append(p.stop())
            beside.run()
        return times, beside
    finally:
        stop_worker(p)


TURN = 1.0
"""Seconds between a loop's first stop and its second once the worker listens: an agent's turn
(seconds to minutes in Claude Code), during which the worker folds what the first stop wrote."""


def worker_up(p: Project) -> None:
    """Wait (up to 20 s) for the warm worker the first stop started, then ``TURN`` seconds: the agent
    works meanwhile."""
    deadline = time.monotonic() + 20
    while not (p.root / ".ralph" / "stop-worker.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(TURN)


def stop_worker(p: Project) -> None:
    """SIGTERM the project's warm worker (its pid is in the home's ``stop-worker.lock``)."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((p.root / ".ralph" / "stop-worker.lock").read_text()), signal.SIGTERM)


def bench_native(
    tmp: Path,
    master: Path,
    runs: int,
    progress: Callable[[str], None],
    warm: bool,
    hook: Path | None,
    far: int = FAR,
    env: dict[str, str] | None = None,
    kind: str = "",
) -> tuple[list[Sample], list[Sample], Beside, Beside]:
    """(stop 2 of ``runs`` fresh loops, stops ``far``.. of the last one, the baselines beside each);
    ``warm``: with RALPH_WARM=1; ``env`` added to the hook's environment."""
    second: list[Sample] = []
    last: Project | None = None
    kind = kind or ("warm" if warm else "native")
    beside2, beside_far = Beside(tmp, master, f"{kind}-2", hook), Beside(tmp, master, f"{kind}-far", hook)
    for r in range(runs):
        if last is not None:
            stop_worker(last)
        last = native(tmp, f"{kind}-{r}", transcript_copy(master, tmp / f"{kind}-{r}.jsonl"), far)
        if warm:
            last.env["RALPH_WARM"] = "1"
        last.env.update(env or {})
        last.stop()
        if warm:
            worker_up(last)
        second.append(last.stop())
        beside2.run()
    assert last is not None
    try:
        while last.stops < far - 1:
            last.stop()
            if last.stops % 20 == 0:
                progress(f"  ... stop {last.stops}")
        distant: list[Sample] = []
        for _ in range(runs):
            distant.append(last.stop())
            beside_far.run()
        return second, distant, beside2, beside_far
    finally:
        stop_worker(last)


def git_project(tmp: Path, name: str, master: Path, snapshots: bool) -> Project:
    """A ledger-native loop in a git project of 300 committed files, its snapshots on or off."""
    p = native(tmp, name, transcript_copy(master, tmp / f"{name}.jsonl"), FAR)
    for i in range(300):
        (p.root / "src" / f"m{i // 30}").mkdir(parents=True, exist_ok=True)
        (p.root / "src" / f"m{i // 30}" / f"f{i}.py").write_text(f"value = {i}\n" * 40)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=p.root, check=True)
    subprocess.run([*git, "add", "src"], cwd=p.root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=p.root, check=True)
    (p.root / "ralph.toml").write_text(
        f"max_iterations = {FAR + 1000}\nsnapshots = {str(snapshots).lower()}\n"
    )
    p.env["RALPH_WARM"] = "1"
    return p


Snaps = tuple[list[Sample], list[Sample], list[Sample]]


def bench_snapshots(tmp: Path, master: Path, runs: int) -> Snaps:
    """Warm ledger-native stops in three git projects, taken in turn (the agent edits a file before
    each stop): snapshots and the hash chain on (as shipped), snapshots off, and both off (the
    chain off by ``chain_off``): (on, snapshots off, both off)."""
    on, off = git_project(tmp, "snap-on", master, True), git_project(tmp, "snap-off", master, False)
    bare = git_project(tmp, "both-off", master, False)
    bare.env.update(chain_off(tmp))
    projects = (on, off, bare)
    try:
        for p in projects:
            p.stop()
            worker_up(p)
        times: Snaps = ([], [], [])
        for _ in range(runs):
            for p, into in zip(projects, times, strict=True):
                edited = p.root / "src" / "m1" / f"f{30 + p.stops % 20}.py"
                edited.write_text(edited.read_text() + f"more = {p.stops}\n")
                into.append(p.stop())
        return times
    finally:
        for p in projects:
            stop_worker(p)


def snapshots_table(snaps: Snaps) -> str:
    """The stop in a git project with snapshots and the chain on, against each off (medians, ratio)."""
    on, off, bare = snaps
    return targets(
        [
            ("stop, warm, git: snapshots + chain on", med(on), "snapshots off", med(off), SNAP_RATIO),
            ("stop, warm, git: snapshots + chain on", med(on), "both off", med(bare), SNAP_RATIO),
        ]
    )


SNAP_RATIO = 1.5
"""A warm ledger-native stop in a git project with snapshots and the chain on: at most this times the
same stop with them off (a snapshot is five git processes, ~20-30 ms: docs/design/snapshots.md)."""


def bench_cmd(code: str, runs: int) -> list[Sample]:
    """``runs`` runs of ``python -c code``, the Python the hooks run (:data:`BIN`)."""
    return [timed([str(BIN[0] / "python"), "-c", code])[0] for _ in range(runs)]


def row(name: str, times: list[Sample], ratios: str, target: str = "", verdict: str = "") -> str:
    cells = [
        f"{name:<46}",
        f"{statistics.median(times):8.1f}",
        f"{min(times):8.1f}",
        f"{max(times):8.1f}",
        f"{statistics.median(t.cpu for t in times):6.1f}",
        f"{statistics.median(t.worker for t in times):6.1f}",
        f"{ratios:<24}",
        f"{target:<26}",
        f"{verdict:<4}",
    ]
    return "| " + " | ".join(cells) + " |"


OFFICIAL_RATIO = 0.5
"""A warm stop, drop-in or ledger-native: at most this times the official hook's, run beside it."""


def med(times: list[Sample]) -> float:
    return statistics.median(times) if times else float("nan")


def targets(rows: list[tuple[str, float, str, float, float]]) -> str:
    """The targets as a table: (target, figure, baseline, its median, the ratio it must stay under;
    ``nan``: not measured); each with its ratio and PASS, FAIL or n/a."""
    table = [["target", "figure (ms)", "baseline", "baseline (ms)", "ratio", "limit", "verdict"]]
    for name, figure, baseline, base, limit in rows:
        ratio = figure / base if base == base and base > 0 else float("nan")
        verdict = "n/a" if ratio != ratio else ("PASS" if ratio <= limit else "FAIL")
        cells = [f"{figure:.1f}", baseline, f"{base:.1f}", f"{ratio:.2f}x", f"<= {limit}x", verdict]
        table.append([name, *cells])
    return markdown_table(table, right=(1, 3, 4))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=30, help="measured stops (and baseline runs) per row")
    p.add_argument(
        "--official",
        help=f"the official ralph-loop plugin's stop-hook.sh (default: ${OFFICIAL_ENV}, else "
        "~/.claude/plugins/**/ralph-loop/hooks/stop-hook.sh)",
    )
    p.add_argument(
        "--editable",
        action="store_true",
        help="run the hooks from this checkout's .venv (its editable install), not a regular install",
    )
    p.add_argument("--far", type=int, default=FAR, help=f"the stop the far rows start at (default {FAR})")
    p.add_argument(
        "--chain-only",
        action="store_true",
        help="only the warm ledger-native stops with the hash chain on and off",
    )
    p.add_argument(
        "--snapshots-only",
        action="store_true",
        help="only the warm ledger-native stops in a git project, snapshots and the chain on and off",
    )
    args = parse_with_smoke(p, argv, ("--runs", "1", "--far", "5"))
    runs, far = max(1, args.runs), max(3, args.far)
    hook = official_hook(args.official)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if hook is None:
        progress("the official ralph-loop Stop hook was not found (--official PATH): its rows say n/a")
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        if not args.editable:
            BIN[0] = installed(tmp)
        master = tmp / "master.jsonl"
        build_transcript(master)
        size = master.stat().st_size
        if args.snapshots_only:
            progress("ledger-native stops in a git project, warm, snapshots and the chain on and off ...")
            snaps = bench_snapshots(tmp, master, runs)
            print(f"transcript: {size:,} bytes; {runs} runs per row, each stop a fresh process; times in ms")
            print(snapshots_table(snaps))
            return 0
        progress("ledger-native stops, warm, hash chain on and off ...")
        chain = bench_chain(tmp, master, runs, progress, far)
        if args.chain_only:
            print(f"transcript: {size:,} bytes; {runs} runs per row, each stop a fresh process; times in ms")
            print(chain_table(chain, far))
            return 0
        progress("drop-in stops, in-process (RALPH_WARM=0) ...")
        dropped, beside = bench_drop_in(tmp, master, runs, False, hook)
        progress("drop-in stops, warm worker (the default) ...")
        dropped_warm, beside_warm = bench_drop_in(tmp, master, runs, True, hook)
        progress("ledger-native stops, in-process (RALPH_WARM=0) ...")
        second, far_times, _, _ = bench_native(tmp, master, runs, progress, False, None, far)
        progress("ledger-native stops, warm worker (the default) ...")
        warm2, warm100, beside2, beside100 = bench_native(tmp, master, runs, progress, True, hook, far)
        progress("ledger-native stops in a git project, warm, snapshots on and off ...")
        snaps = bench_snapshots(tmp, master, runs)
        snap_on, snap_off, _ = snaps
        progress("baselines ...")
        bare = bench_cmd("pass", runs)
        duck = bench_cmd("import duckdb", runs)
    base, duck_med = statistics.median(bare), statistics.median(duck)
    med2, med100 = statistics.median(second), statistics.median(far_times)

    def ratios(times: list[Sample], beside: list[Sample] | None = None) -> str:
        """Against ``python3 -c pass`` (run beside these stops when ``beside`` is given) and DuckDB."""
        med = statistics.median(times)
        pass_med = statistics.median(beside) if beside else base
        return f"{med / pass_med:4.1f}x pass {med / duck_med:4.2f}x duckdb"

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    print(f"transcript: {size:,} bytes; {runs} runs per row, each stop a fresh process; times in ms")
    print(f"official hook: {hook if hook else 'not found (--official PATH)'}")
    layout = "this checkout's .venv (editable install)" if args.editable else "a regular install's layout"
    print(f"ralph-ledger hook run from {layout}")
    head = [
        f"{'command':<46}",
        f"{'median':>8}",
        f"{'min':>8}",
        f"{'max':>8}",
        f"{'cpu':>6}",
        f"{'worker':>6}",
        f"{'ratios':<24}",
        f"{'target':<26}",
        "    ",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("-" * (len(h) + 2) for h in head) + "|")
    for label, times, paired in (
        (" (in-process)", dropped, beside),
        (" (warm, default)", dropped_warm, beside_warm),
    ):
        print(
            row(
                f"drop-in stop{label}",
                times,
                ratios(times, paired.bare),
                f"<= {DROP_IN_RATIO}x pass beside it",
                verdict(statistics.median(times) <= DROP_IN_RATIO * statistics.median(paired.bare)),
            )
        )
    for label, two, hundred in ((", in-process", second, far_times), (", warm (default)", warm2, warm100)):
        m2, m100 = statistics.median(two), statistics.median(hundred)
        print(
            row(
                f"ledger-native stop 2{label}",
                two,
                ratios(two),
                f"<= {NATIVE_MS:.0f} ms",
                verdict(m2 <= NATIVE_MS),
            )
        )
        print(
            row(
                f"ledger-native stops {far}-{far + runs - 1}{label}",
                hundred,
                ratios(hundred),
                f"<= {NATIVE_MS:.0f} ms, <= {GROWTH}x stop 2",
                verdict(m100 <= NATIVE_MS and m100 <= GROWTH * m2),
            )
        )
    print(row("ledger-native stop, warm, git, snapshots on", snap_on, ratios(snap_on)))
    print(row("ledger-native stop, warm, git, snapshots off", snap_off, ratios(snap_off)))
    official = [*beside.official, *beside_warm.official, *beside2.official, *beside100.official]
    if official:
        print(row("official plugin's shell hook, beside the stops", official, ratios(official)))
    print(row("python3 -c pass", bare, ratios(bare)))
    paired_bare = beside.bare + beside_warm.bare
    print(row("python3 -c pass, beside the drop-in stops", paired_bare, ratios(paired_bare)))
    print(row("python3 -c 'import duckdb'", duck, ratios(duck)))
    for label, times, paired in (("in-process", dropped, beside), ("warm", dropped_warm, beside_warm)):
        wall = statistics.median(times) / statistics.median(paired.bare)
        cpu = statistics.median(s.cpu for s in times) / statistics.median(s.cpu for s in paired.bare)
        print(f"drop-in stop {label} / python3 -c pass run after each stop: {wall:.2f}x wall, {cpu:.2f}x cpu")
    warm_growth = statistics.median(warm100) / statistics.median(warm2)
    print(
        f"stop {far} / stop 2: in-process {med100 / med2:.2f}x, warm {warm_growth:.2f}x (target <= {GROWTH}x)"
    )
    snap_ratio = statistics.median(snap_on) / statistics.median(snap_off)
    print(
        f"ledger-native stop, warm, in a git project: snapshots on {statistics.median(snap_on):.1f} ms / "
        f"off {statistics.median(snap_off):.1f} ms = {snap_ratio:.2f}x (medians, taken in turn)"
    )
    print()
    official_name = "official hook beside it"
    print(
        targets(
            [
                (
                    "drop-in stop, warm (default)",
                    med(dropped_warm),
                    official_name,
                    med(beside_warm.official),
                    OFFICIAL_RATIO,
                ),
                (
                    "drop-in stop, in-process",
                    med(dropped),
                    official_name,
                    med(beside.official),
                    OFFICIAL_RATIO,
                ),
                (
                    "ledger-native stop 2, warm (default)",
                    med2_warm := med(warm2),
                    official_name,
                    med(beside2.official),
                    OFFICIAL_RATIO,
                ),
                (
                    f"ledger-native stops {far}.., warm (default)",
                    med(warm100),
                    official_name,
                    med(beside100.official),
                    OFFICIAL_RATIO,
                ),
                (
                    "drop-in stop, warm (default)",
                    med(dropped_warm),
                    "python3 -c pass beside it",
                    med(beside_warm.bare),
                    DROP_IN_RATIO,
                ),
                (
                    "drop-in stop, in-process",
                    med(dropped),
                    "python3 -c pass beside it",
                    med(beside.bare),
                    DROP_IN_RATIO,
                ),
                (
                    f"ledger-native stops {far}.., warm (default)",
                    med(warm100),
                    "its stop 2",
                    med2_warm,
                    GROWTH,
                ),
                (f"ledger-native stops {far}.., in-process", med100, "its stop 2", med2, GROWTH),
            ]
        )
    )
    print()
    print(chain_table(chain, far))
    print()
    print(snapshots_table(snaps))
    return 0


Chain = tuple[list[Sample], list[Sample], list[Sample], list[Sample]]


def bench_chain(tmp: Path, master: Path, runs: int, progress: Callable[[str], None], far: int) -> Chain:
    """(stop 2 and stops ``far``.. of warm ledger-native loops with the hash chain on, then the same
    with it off: ``chain_off``), in this one run, turn about: each fresh loop with the chain on is
    followed by one with it off, and the far stops alternate between a long loop of each."""
    off = chain_off(tmp)
    second: dict[bool, list[Sample]] = {True: [], False: []}
    longest: dict[bool, Project] = {}
    for r in range(runs):
        for on in (True, False):
            kind = f"chain-{'on' if on else 'off'}-{r}"
            p = native(tmp, kind, transcript_copy(master, tmp / f"{kind}.jsonl"), far)
            p.env["RALPH_WARM"] = "1"
            if not on:
                p.env.update(off)
            p.stop()
            worker_up(p)
            second[on].append(p.stop())
            if r < runs - 1:
                stop_worker(p)
            else:
                longest[on] = p
    distant: dict[bool, list[Sample]] = {True: [], False: []}
    try:
        while longest[True].stops < far - 1:
            for on in (True, False):
                longest[on].stop()
            if longest[True].stops % 20 == 0:
                progress(f"  ... stop {longest[True].stops}")
        for _ in range(runs):
            for on in (True, False):
                distant[on].append(longest[on].stop())
    finally:
        for p in longest.values():
            stop_worker(p)
    return second[True], distant[True], second[False], distant[False]


def chain_table(chain: Chain, far: int) -> str:
    """The stops with the chain on against off (medians, ratio, the limit ``CHAIN_RATIO``)."""
    on2, on_far, off2, off_far = chain
    return targets(
        [
            ("ledger-native stop 2, warm, chain on", med(on2), "the same, chain off", med(off2), CHAIN_RATIO),
            (
                f"ledger-native stops {far}.., warm, chain on",
                med(on_far),
                "the same, chain off",
                med(off_far),
                CHAIN_RATIO,
            ),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
