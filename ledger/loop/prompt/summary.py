"""The loop so far, in at most 2 KB: what each next prompt carries with ``summary = true``.

Every number is read from the views and detectors (``iterations``, ``iteration_scores``,
``rule_results``, ``thrashing``, ``validation_stall``, ``quality_regression`` and the guards' own
facts, ``ledger.loop.decide.facts.read_facts``), through the session's in-memory ledger
(``ledger.storage.fold``); nothing is computed again here. What it says, how a long loop folds to
fit ``MAX_BYTES``, and why: docs/design/summary-and-prompt.md#the-summary-of-the-loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ledger import events as ev
from ledger.core.errors import one_line
from ledger.core.money import usd
from ledger.core.words import plural
from ledger.loop.decide.facts import read_facts
from ledger.loop.decide.guards import Facts, GuardConfig
from ledger.loop.engine import Engine
from ledger.storage.database import Ledger

MAX_BYTES: Final = 2048
"""The most a summary takes, in UTF-8 bytes."""
COMPACT_AFTER: Final = 10
"""Beyond this many iterations, all but the last ``FULL_TAIL`` are one line each."""
FULL_TAIL: Final = 3
NEAR: Final = 0.5
"""A guard whose measure reached this fraction of its threshold is close to tripping."""
FEEDBACK_LINES: Final = 3
LINE_CHARS: Final = 160
LIST_ITEMS: Final = 4

_ITERATIONS = """
SELECT i.iteration, s.score, i.files_modified, i.guards,
       list_transform(list_filter(s.results, lambda r: NOT r.passed OR r.errored), lambda r: r.name)
FROM iterations i LEFT JOIN iteration_scores s USING (session_id, iteration)
WHERE i.session_id = ? ORDER BY i.iteration"""
_FAILING = """
SELECT rule, min(iteration) FILTER (WHERE iteration > last_ok) AS since
FROM (
  SELECT r.iteration, r.rule, r.passed AND NOT r.errored AS ok,
         coalesce(max(r.iteration) FILTER (WHERE r.passed AND NOT r.errored) OVER (PARTITION BY r.rule), 0)
           AS last_ok
  FROM rule_results r JOIN iteration_scores s ON s.session_id = r.session_id AND s.validation_seq = r.seq
  WHERE r.session_id = ?
)
GROUP BY rule HAVING NOT arg_max(ok, iteration) ORDER BY since, rule"""
"""Each rule whose latest run (its iteration's last validation) failed or errored, and the first
iteration of the failing runs since it last passed (a rule run every third iteration counts too)."""
_REPEATED = """
SELECT file, times FROM thrashing(session := ?, min_iterations := 2) ORDER BY times DESC, file LIMIT ?"""
_STALL = "SELECT best_before FROM validation_stall(session := ?, span := ?) WHERE iteration = ?"
_FALL = (
    "SELECT first_score, score FROM quality_regression(session := ?, span := ?, min_drop := 0) "
    "WHERE iteration = ?"
)
_FEEDBACK = """
SELECT iteration, feedback FROM events WHERE session_id = ? AND type = 'signal_resolved'
ORDER BY seq DESC LIMIT 1"""


@dataclass(frozen=True, slots=True)
class _Iteration:
    """One row of the ``iterations`` view, as the summary shows it."""

    n: int
    score: float | None
    files: list[str]
    guards: list[str]
    failing: list[str]

    def line(self) -> str:
        """The iteration on one line: number, score, failing rules, guards tripped."""
        what = ", ".join(_few(self.failing)) if self.failing else "passed"
        if self.score is None:
            what = "not validated"
        guards = f" [{', '.join(self.guards)}]" if self.guards else ""
        return _cut(f"- {self.n}: {_score(self.score)} ({what}){guards}")

    def full(self) -> list[str]:
        """The iteration in full: score, failing rules, files changed, guards tripped."""
        if self.score is None:
            lines = [f"Iteration {self.n}: not validated"]
        else:
            failing = f"  failing: {', '.join(_few(self.failing))}" if self.failing else "  no rule failed"
            lines = [f"Iteration {self.n}: score {_score(self.score)}", failing]
        lines.append(f"  files: {', '.join(_few(self.files))}" if self.files else "  no file changed")
        if self.guards:
            lines.append(f"  guards tripped: {', '.join(self.guards)}")
        return [_cut(line) for line in lines]


def loop_summary(ledger: Ledger, session_id: str, guards: GuardConfig, now: datetime) -> str:
    """The summary of ``session_id`` after its latest validation, at most ``MAX_BYTES`` long, read
    from ``ledger`` (the session's in-memory ledger) with the guards' settings ``guards`` at ``now``.
    Empty when no iteration is recorded yet."""
    con = ledger.con
    rows = [
        _Iteration(int(n), None if s is None else float(s), list(f or []), list(g or []), list(r or []))
        for n, s, f, g, r in con.execute(_ITERATIONS, [session_id]).fetchall()
    ]
    if not rows:
        return ""
    facts = read_facts(ledger, session_id, guards, now)
    head = [_header(rows, facts)]
    state: list[str] = []
    failing = con.execute(_FAILING, [session_id]).fetchall()
    if failing:
        named = [f"{rule} since iteration {since}" for rule, since in failing]
        state.append(_cut(f"Still failing: {', '.join(_few(named))}."))
    repeated = con.execute(_REPEATED, [session_id, LIST_ITEMS]).fetchall()
    if repeated:
        state.append(
            _cut(f"Files changed repeatedly: {', '.join(f'{f} ({n} iterations)' for f, n in repeated)}.")
        )
    near = _near(ledger, session_id, guards, facts, repeated)
    if near:
        state += ["Close to tripping:", *(f"- {_cut(line)}" for line in near)]
    last = con.execute(_FEEDBACK, [session_id]).fetchone()
    if last is not None and last[1]:
        lines = [str(x) for x in last[1] if str(x).strip()]
        state += [
            f"Last feedback (iteration {last[0]}):",
            *(f"- {_cut(_flat(x))}" for x in lines[:FEEDBACK_LINES]),
        ]
        if len(lines) > FEEDBACK_LINES:
            state.append(f"- (and {len(lines) - FEEDBACK_LINES} more)")
    room = MAX_BYTES - _size(head + state) - 1
    return _fit("\n".join([*head, *_history(rows, room), *state]))


def _header(rows: Sequence[_Iteration], facts: Facts) -> str:
    """The first line: where the loop stands, the latest and the best score."""
    latest = rows[-1]
    scored = [r for r in rows if r.score is not None]
    text = f"Loop so far: iteration {facts.iteration} of {facts.max_iterations} done"
    if latest.score is not None:
        text += f", score {_score(latest.score)}"
    if scored:
        best = max(scored, key=lambda r: (r.score or 0.0, -r.n))
        if best is not latest and best.score != latest.score:
            text += f" (best {_score(best.score)}, at iteration {best.n})"
    return text + "."


def _history(rows: Sequence[_Iteration], room: int) -> list[str]:
    """The iterations in at most ``room`` bytes: all in full up to ``COMPACT_AFTER`` of them, else the
    last ``FULL_TAIL`` in full and the older ones on one line each; while that does not fit, the
    oldest lines fold into one range line, then fewer iterations stay in full."""
    if len(rows) <= COMPACT_AFTER:
        full = [line for r in rows for line in r.full()]
        if _size(full) <= room:
            return full
    title = "Iterations (score, failing rules):"
    out: list[str] = []
    for keep in range(min(FULL_TAIL, len(rows)), -1, -1):
        old, tail = rows[: len(rows) - keep], rows[len(rows) - keep :]
        full = [line for r in tail for line in r.full()]
        lines = [r.line() for r in old]
        folded = 0
        while lines and _size([title, *_folded(old[:folded]), *lines, *full]) > room:
            folded += 1
            lines.pop(0)
        out = [title, *_folded(old[:folded]), *lines, *full]
        if _size(out) <= room:
            break
    return out


def _folded(rows: Sequence[_Iteration]) -> list[str]:
    """One line for the oldest iterations: their range and the range of their scores."""
    if not rows:
        return []
    scores = [r.score for r in rows if r.score is not None]
    span = f"{rows[0].n}-{rows[-1].n}" if len(rows) > 1 else str(rows[0].n)
    if not scores:
        return [f"- {span}: not scored"]
    return [f"- {span}: scores {_score(min(scores))} to {_score(max(scores))}"]


def _near(
    ledger: Ledger, session_id: str, cfg: GuardConfig, f: Facts, repeated: Sequence[tuple[Any, ...]]
) -> list[str]:
    """The enabled guards whose measure reached ``NEAR`` of their threshold, one line each."""
    out: list[str] = []

    def near(value: float, limit: float) -> bool:
        return limit > 0 and value / limit >= NEAR

    if cfg.max_iterations.enabled and near(f.iteration, f.max_iterations):
        out.append(f"max_iterations: {f.iteration} of {f.max_iterations} iterations used")
    cb = cfg.circuit_breaker
    if cb.enabled and f.failure_streak and near(f.failure_streak, cb.threshold):
        out.append(
            f"circuit_breaker: {f.failure_streak} failed validations in a row, trips at {cb.threshold}"
        )
    et = cfg.error_threshold
    if et.enabled and f.error_streak and near(f.error_streak, et.limit):
        out.append(f"error_threshold: rules errored in {f.error_streak} runs in a row, trips at {et.limit}")
    th = cfg.thrashing
    if th.enabled and repeated and near(int(repeated[0][1]), th.min_iterations):
        file, times = repeated[0]
        out.append(f"thrashing: {file} changed in {times} iterations, trips at {th.min_iterations}")
    out += _trend(ledger, session_id, cfg, f.iteration)
    if cfg.time_limit.enabled and near(f.elapsed_s, cfg.time_limit.seconds):
        out.append(f"time_limit: {f.elapsed_s:.0f} s of {cfg.time_limit.seconds:.0f} s used")
    if cfg.token_budget.enabled and near(f.tokens, cfg.token_budget.tokens):
        out.append(f"token_budget: {f.tokens:,} of {cfg.token_budget.tokens:,} tokens used")
    cost = cfg.cost_budget
    if cost.enabled and f.cost_usd is not None and near(f.cost_usd, cost.max_cost_usd):
        out.append(f"cost_budget: {usd(f.cost_usd)} of {usd(cost.max_cost_usd)} spent")
    cw = cfg.context_window
    if cw.enabled and f.context is not None and near(f.context[0] / f.context[1], cw.max_fraction):
        used = f.context[0] / f.context[1]
        out.append(f"context_window: {used:.0%} full, stops at {cw.max_fraction:.0%}")
    return out


def _trend(ledger: Ledger, session_id: str, cfg: GuardConfig, n: int) -> list[str]:
    """Stall and regression one iteration short of their span (their detectors, one span shorter)."""
    out: list[str] = []
    stall = cfg.validation_stall
    if stall.enabled and stall.span >= 2:
        row = ledger.con.execute(_STALL, [session_id, stall.span - 1, n]).fetchone()
        if row is not None:
            best = "" if row[0] is None else f" (best {_score(float(row[0]))})"
            out.append(
                f"validation_stall: no better score for {plural(stall.span - 1, 'iteration')}{best}, "
                f"trips at {stall.span}"
            )
    qr = cfg.quality_regression
    if qr.enabled and qr.span >= 3:
        row = ledger.con.execute(_FALL, [session_id, qr.span - 1, n]).fetchone()
        if row is not None:
            out.append(
                f"quality_regression: score fell {_score(float(row[0]))} -> {_score(float(row[1]))}; "
                f"trips when {qr.span} scores in a row fall by more than {qr.min_drop:g} in all"
            )
    return out


def _score(score: float | None) -> str:
    return "-" if score is None else f"{score:.0f}"


def _few(items: Sequence[str]) -> list[str]:
    """At most ``LIST_ITEMS`` of ``items``, then how many more."""
    if len(items) <= LIST_ITEMS:
        return list(items)
    return [*items[:LIST_ITEMS], f"+{len(items) - LIST_ITEMS} more"]


def _flat(text: str) -> str:
    """``text`` on one line (whitespace folded)."""
    return " ".join(text.split())


def _cut(text: str) -> str:
    """``text`` cut to ``LINE_CHARS`` characters."""
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def _size(lines: Sequence[str]) -> int:
    """The UTF-8 bytes of ``lines`` joined by newlines (plus one newline for the last)."""
    return sum(len(line.encode()) + 1 for line in lines)


def _fit(text: str) -> str:
    """``text``, cut at a line (or a character) so that it takes at most ``MAX_BYTES`` bytes."""
    data = text.encode()
    if len(data) <= MAX_BYTES:
        return text
    cut = data[: MAX_BYTES - len("\n…".encode())].decode(errors="ignore")
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    return cut + "\n…"


def summary_for(engine: Engine, session_id: str) -> str:
    """``loop_summary`` of a session of ``engine`` now: its ledger, its recorded guards, its clock."""
    view = engine.view(session_id)
    return loop_summary(view.ledger, session_id, view.config.guards, engine.clock())


def summary_to_give(engine: Engine, session_id: str, iteration: int) -> str:
    """``summary_for`` after ``iteration``, or ``""`` with the error recorded (``error_recorded``,
    component ``summary``) when it cannot be made: the loop goes on without it rather than stop."""
    try:
        return summary_for(engine, session_id)
    except Exception as exc:  # the summary is a courtesy to the agent: it never ends a loop
        error = ev.ErrorRecorded(
            session_id=session_id, iteration=iteration, component="summary", message=one_line(exc)
        )
        engine.journal(session_id).append(error)
        return ""
