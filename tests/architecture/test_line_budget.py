"""The line budget of ``ledger/`` and ``tui/`` (docs/design/architecture.md, "Size"): a module is
reported from ``REPORT_FROM`` lines and fails the suite above ``FAIL_ABOVE``. Modules are split along
their seams, never to pass a count; the report shows which to look at."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Final

ROOT = Path(__file__).resolve().parents[2]
REPORT_FROM: Final = 400
FAIL_ABOVE: Final = 700


def module_sizes(root: Path, packages: tuple[str, ...] = ("ledger", "tui")) -> dict[str, int]:
    """Each module of ``packages`` under ``root`` (relative path) -> its number of lines."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }


def over_budget(sizes: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """The modules to report (``REPORT_FROM`` lines up to ``FAIL_ABOVE``) and those that fail."""
    report = {m: n for m, n in sizes.items() if REPORT_FROM <= n <= FAIL_ABOVE}
    failing = {m: n for m, n in sizes.items() if n > FAIL_ABOVE}
    return report, failing


def test_no_module_is_over_the_budget_and_the_long_ones_are_reported() -> None:
    sizes = module_sizes(ROOT)
    assert {"ledger/loop/engine.py", "tui/app.py"} <= set(sizes)
    report, failing = over_budget(sizes)
    if report:
        listed = ", ".join(f"{m} ({n})" for m, n in sorted(report.items(), key=lambda kv: -kv[1]))
        warnings.warn(f"modules from {REPORT_FROM} lines: {listed}", stacklevel=1)
    assert failing == {}, f"modules over {FAIL_ABOVE} lines: split them along their seams"


def test_the_budget_reports_from_400_lines_and_fails_above_700(tmp_path: Path) -> None:
    package = tmp_path / "ledger"
    package.mkdir()
    for name, lines in {"small": 399, "long": 400, "edge": 700, "huge": 701}.items():
        (package / f"{name}.py").write_text("x = 1\n" * lines)
    report, failing = over_budget(module_sizes(tmp_path, ("ledger",)))
    assert report == {"ledger/long.py": 400, "ledger/edge.py": 700}
    assert failing == {"ledger/huge.py": 701}
