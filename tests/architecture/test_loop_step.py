"""Drivers translate, the loop decides (docs/design/loop-step.md): what happens after a turn is
decided in ``ledger/loop/step.py`` (and its light half, ``ledger/loop/decision.py``) alone. The
validation (``Engine.judge``) and the next prompt (``next_prompt``) each have one caller in
``ledger/`` and ``tui/``, and the drivers that take turns never read or append to a journal around
the engine."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEP = "ledger/loop/step.py"
DRIVERS = (
    "ledger/drivers/runner/run.py",
    "ledger/drivers/claude_code/stop/native.py",
    "ledger/drivers/mcp/tools.py",
    "tui",
)


def call_sites(root: Path, names: set[str], places: tuple[str, ...] = ("ledger", "tui")) -> list[str]:
    """``file:line name`` of every call of a function or method named in ``names``, in the modules
    and packages ``places``."""
    found = []
    for place in places:
        top = root / place
        for path in sorted(top.rglob("*.py")) if top.is_dir() else [top]:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in names:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return found


def test_validation_and_the_next_prompt_have_one_caller_each() -> None:
    judged = call_sites(ROOT, {"judge", "validate"})
    assert [site.split(":")[0] for site in judged] == [STEP, STEP], judged  # take_turn and check
    composed = call_sites(ROOT, {"next_prompt"})
    assert len(composed) == 1 and composed[0].startswith("ledger/loop/decision.py"), composed


def test_the_engine_has_no_validate_of_its_own() -> None:
    from ledger.loop.engine import Engine

    assert not hasattr(Engine, "validate")  # a driver validates through LoopSession only


def test_the_drivers_do_not_touch_journals_around_the_engine() -> None:
    touching = {"read_new", "events_of", "Journal", "journal", "fold"}
    sites = [site for driver in DRIVERS for site in call_sites(ROOT, touching, (driver,))]
    assert sites == []


def test_the_check_finds_calls(tmp_path: Path) -> None:
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "a.py").write_text("x.judge(1)\nnext_prompt('t', r)\ndef judge(): pass\n")
    assert call_sites(tmp_path, {"judge", "next_prompt"}, ("ledger",)) == [
        "ledger/a.py:1 judge",
        "ledger/a.py:2 next_prompt",
    ]
