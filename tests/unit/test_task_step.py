"""The loop step of a task-list loop (docs/design/task-lists.md): one task at a time, the next one
in the same session with a fresh prompt, a stuck task skipped or stopping the loop, a task's own
rules and iteration cap, the file ticked after the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import msgspec
import pytest

from ledger import events as E
from ledger.loop.config.loop_config import LoopConfig
from ledger.loop.decision import Turn
from ledger.loop.engine import Engine
from ledger.loop.step import Continue, End, LoopSession
from ledger.loop.tasks.files import read_tasks
from ledger.loop.tasks.progress import file_record, task_state

T = TypeVar("T", bound=E.Event)
LIST = b"# Plan\n\n- [ ] add the parser\n  with tests\n- [ ] add the CLI\n- [ ] write the docs\n"


def start(engine: Engine, work: Path, text: bytes = LIST, **config: object) -> tuple[LoopSession, Path]:
    path = work / "tasks.md"
    path.write_bytes(text)
    listed = read_tasks(path)
    cfg = msgspec.structs.replace(LoopConfig(max_iterations=20), **config)
    engine.start(
        "s",
        cfg,
        prompt="Build it.",
        task_list=listed.tasks,
        task_file=file_record(engine.home.root.parent, path),
    )
    return LoopSession(engine, "s", "Build it."), path


def of(session: LoopSession, cls: type[T]) -> list[T]:
    return [e for e in session.events() if isinstance(e, cls)]


def test_three_tasks_run_one_at_a_time_and_tick_the_file(engine: Engine, work: Path) -> None:
    session, path = start(engine, work)
    first = session.prompt_of(1)
    assert "Current task (1 of 3): add the parser" in first and "with tests" in first
    assert first.startswith("Build it.")
    assert isinstance(session.take_turn(Turn("working on it")), Continue)
    step = session.take_turn(Turn("done <promise>COMPLETE</promise>"))
    assert isinstance(step, Continue) and step.iteration == 3
    assert "Current task (2 of 3): add the CLI" in step.prompt and "1 of 3 done, 2 left" in step.prompt
    assert "Feedback from iteration" not in step.prompt  # a fresh prompt for a new task
    assert path.read_bytes() == LIST.replace(b"- [ ] add the parser", b"- [x] add the parser")
    assert isinstance(session.take_turn(Turn("<promise>COMPLETE</promise>")), Continue)
    end = session.take_turn(Turn("<promise>COMPLETE</promise>"))
    assert isinstance(end, End) and end.signal == "COMPLETE"
    assert path.read_bytes() == LIST.replace(b"- [ ]", b"- [x]")
    assert [(e.task_no, e.iteration) for e in of(session, E.TaskStarted)] == [(1, 1), (2, 3), (3, 4)]
    assert [(e.task_no, e.iteration) for e in of(session, E.TaskCompleted)] == [(1, 2), (2, 3), (3, 4)]
    assert len(of(session, E.SessionCompleted)) == 1
    state = task_state(session.events())
    assert state is not None and state.done() == 3
    ledger = engine.view("s").ledger
    rows = ledger.rows(
        "SELECT task_no, title, status, iterations, first_iteration, last_iteration"
        " FROM tasks ORDER BY task_no"
    )
    assert [tuple(r.values()) for r in rows] == [
        (1, "add the parser", "done", 2, 1, 2),
        (2, "add the CLI", "done", 1, 3, 3),
        (3, "write the docs", "done", 1, 4, 4),
    ]
    (row,) = ledger.rows("SELECT tasks_total, tasks_done, current_task FROM sessions")
    assert row == {"tasks_total": 3, "tasks_done": 3, "current_task": ""}


def test_the_views_of_a_list_under_way(engine: Engine, work: Path) -> None:
    session, _ = start(engine, work, b"- [x] given\n- [ ] first\n- [ ] second\n- [ ] third\n")
    session.take_turn(Turn("<promise>BLOCKED</promise>", tokens=E.TokenUsage(input=10, output=5)))
    session.take_turn(Turn("going", tokens=E.TokenUsage(input=1, output=1), cost_usd=0.25))
    ledger = engine.view("s").ledger
    rows = ledger.rows("SELECT task_no, status, iterations, tokens, cost_usd FROM tasks ORDER BY task_no")
    assert [tuple(r.values()) for r in rows] == [
        (1, "done", 0, 0, None),
        (2, "skipped", 1, 15, None),
        (3, "running", 2, 2, 0.25),  # its start and the iteration under way
        (4, "pending", 0, 0, None),
    ]
    (row,) = ledger.rows("SELECT tasks_total, tasks_done, current_task FROM sessions")
    assert row == {"tasks_total": 4, "tasks_done": 1, "current_task": "second"}


def test_a_blocked_task_is_skipped_by_default(engine: Engine, work: Path) -> None:
    session, path = start(engine, work)
    step = session.take_turn(Turn("<promise>BLOCKED</promise> no parser library"))
    assert isinstance(step, Continue) and "Current task (2 of 3)" in step.prompt
    (blocked,) = of(session, E.TaskBlocked)
    assert blocked.task_no == 1 and blocked.skipped and "BLOCKED" in blocked.reason
    assert not of(session, E.SessionBlocked)
    assert path.read_bytes() == LIST  # a skipped task is not ticked


def test_a_blocked_task_stops_the_loop_when_configured(engine: Engine, work: Path) -> None:
    session, _ = start(engine, work, on_task_blocked="stop")
    end = session.take_turn(Turn("<promise>BLOCKED</promise>"))
    assert isinstance(end, End) and end.signal == "BLOCKED"
    (blocked,) = of(session, E.TaskBlocked)
    assert not blocked.skipped
    tags = [type(e).__name__ for e in session.events()]
    assert tags.index("TaskBlocked") < tags.index("SessionBlocked")


def test_loop_done_ends_the_loop_with_tasks_left(engine: Engine, work: Path) -> None:
    session, _ = start(engine, work)
    end = session.take_turn(Turn("<promise>LOOP_DONE</promise>"))
    assert isinstance(end, End) and end.signal == "COMPLETE"
    state = task_state(session.events())
    assert state is not None and [state.status[n] for n in (1, 2, 3)] == ["done", "pending", "pending"]


def test_a_tasks_own_rules_refuse_its_completion(engine: Engine, work: Path) -> None:
    rule = b'{"name": "flag", "type": "file_exists", "path": "flag"}'
    text = b'[{"title": "make the flag", "rules": [' + rule + b']}, "next"]'
    session, path = start(engine, work, text)
    step = session.take_turn(Turn("<promise>COMPLETE</promise>"))
    assert isinstance(step, Continue) and "flag (task 1)" in step.prompt
    assert not of(session, E.TaskCompleted)
    (work / "flag").write_text("")
    step = session.take_turn(Turn("<promise>COMPLETE</promise>"))
    assert isinstance(step, Continue) and "Current task (2 of 2): next" in step.prompt
    assert b'"done": true' in path.read_bytes()


def test_a_tasks_own_max_iterations_blocks_it(engine: Engine, work: Path) -> None:
    session, _ = start(engine, work, b'[{"title": "hard", "max_iterations": 2}, "easy"]')
    assert isinstance(session.take_turn(Turn("trying")), Continue)
    step = session.take_turn(Turn("still trying"))
    assert isinstance(step, Continue) and "Current task (2 of 2): easy" in step.prompt
    (blocked,) = of(session, E.TaskBlocked)
    assert blocked.skipped and "task_max_iterations" in blocked.reason
    assert [e.guard for e in of(session, E.GuardTripped)] == ["task_max_iterations"]


def test_a_task_file_that_lost_the_task_is_an_error_recorded(engine: Engine, work: Path) -> None:
    session, path = start(engine, work)
    path.write_text("- [ ] something else\n")
    assert isinstance(session.take_turn(Turn("<promise>COMPLETE</promise>")), Continue)
    (error,) = of(session, E.ErrorRecorded)
    assert error.component == "tasks" and "tasks.md" in error.message and "add the parser" in error.message


def test_a_list_done_already_does_not_start(engine: Engine, work: Path) -> None:
    from ledger.loop.engine_types import EngineError

    with pytest.raises(EngineError, match=r"every task of .* is done"):
        start(engine, work, b"- [x] done\n")


def test_a_step_cut_short_after_its_task_ended_finishes_once(engine: Engine, work: Path) -> None:
    """A kill that let the step's lines land up to its ``task_completed`` (docs/design/loop-step.md):
    the resume finishes the step, the next task begins, and the task is completed once."""
    session, _ = start(engine, work)
    session.take_turn(Turn("<promise>COMPLETE</promise>"))
    path = engine.journal("s").path
    lines = path.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"type":"task_completed"' in line)
    path.write_bytes(b"".join(lines[: at + 1]))
    again = LoopSession(Engine(engine.home, work_dir=work, fsync=False), "s", "Build it.")
    assert again.turn_taken()
    step = again.resume()
    assert isinstance(step, Continue) and step.iteration == 2 and "Current task (2 of 3)" in step.prompt
    assert [e.task_no for e in of(again, E.TaskCompleted)] == [1]
    assert [e.task_no for e in of(again, E.TaskStarted)] == [1, 2]
    assert not of(again, E.SessionCompleted)


def test_unblock_lets_the_stopped_task_go_on(engine: Engine, work: Path) -> None:
    """A loop stopped on a blocked task (``on_task_blocked = "stop"``) and unblocked goes on with that
    same task, the person's guidance in its prompt."""
    from ledger.loop.steering.commands import unblock

    session, _ = start(engine, work, on_task_blocked="stop")
    session.take_turn(Turn("<promise>BLOCKED</promise>"))
    unblock(engine, "s", "use the vendored parser")
    step = session.resume()
    assert isinstance(step, Continue) and "Current task (1 of 3): add the parser" in step.prompt
    assert "use the vendored parser" in step.prompt
    assert [e.task_no for e in of(session, E.TaskStarted)] == [1, 1]
    state = task_state(session.events())
    assert state is not None and state.status[1] == "running"


class _Tripwire(list[E.AnyEvent]):
    """Events that may not be read past their first ``LIMIT``."""

    LIMIT = 10

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i, e in enumerate(super().__iter__()):
            assert i < self.LIMIT, "read past the start of the journal"
            yield e


def test_a_loop_without_a_list_is_known_from_its_start(engine: Engine) -> None:
    """The step asks on every turn whether a loop has a task list: a long journal without one is not
    read through for it (its list would be in the append that started it)."""
    engine.start("plain", LoopConfig(max_iterations=100))
    session = LoopSession(engine, "plain", "Do it.")
    for _ in range(5):
        session.take_turn(Turn("going"))
    assert task_state(_Tripwire(session.events())) is None
