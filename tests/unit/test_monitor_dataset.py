"""``DatasetMonitor``: an exported Parquet dataset of three homes read as one fleet, each session with
its source, refreshed when a source is exported again, errors in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger.cli import main as ledger_main
from ledger.core.errors import LedgerError
from ledger.core.home import Home
from ledger.monitor import DatasetMonitor, Monitor, dataset, dataset_sources
from tests.unit.test_tui_support import SAMPLE_FILES

SOURCES = ("alpha", "beta", "gamma")


def home_of(root: Path, index: int) -> Home:
    """A home holding every third sample journal (``index`` 0, 1 or 2)."""
    home = Home.resolve(root)
    home.ensure()
    for src in SAMPLE_FILES[index::3]:
        shutil.copy(src, home.journals / src.name)
    return home


def export(home: Home, dest: Path, source: str, *more: str) -> None:
    """``ralph-ledger --home HOME export --parquet DEST --source SOURCE [MORE]``, which must succeed."""
    words = ["--home", str(home.root), "export", "--parquet", str(dest), "--source", source, *more]
    assert ledger_main(words) == 0


def add_session(home: Home, sample: str, new_id: str) -> None:
    """A copy of a sample journal under a new session id."""
    lines = []
    for line in (SAMPLE_FILES[0].parent / f"{sample}.jsonl").read_text().splitlines():
        event = json.loads(line)
        event["session_id"] = new_id
        lines.append(json.dumps(event))
    (home.journals / f"{new_id}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, dict[str, Home]]:
    """Three homes (the samples split in three), each exported into one dataset under its name."""
    dest = tmp_path / "dataset"
    homes = {name: home_of(tmp_path / name, i) for i, name in enumerate(SOURCES)}
    for name, home in homes.items():
        export(home, dest, name)
    return dest, homes


def loaded(dest: Path) -> DatasetMonitor:
    monitor = DatasetMonitor(dest)
    list(monitor.load())
    return monitor


def test_every_source_answers_like_one_ledger_of_all_journals(fleet: tuple[Path, dict[str, Home]]) -> None:
    dest, homes = fleet
    monitor = loaded(dest)
    local = Monitor(SAMPLE_FILES)
    list(local.load())
    rows = monitor.sessions()
    assert {r.source for r in rows} == set(SOURCES)
    for r in rows:
        assert (SAMPLE_FILES[0].parent / f"{r.session_id}.jsonl") in SAMPLE_FILES[
            SOURCES.index(r.source) :: 3
        ]
    expected = {r.session_id: r for r in local.sessions()}
    assert {r.session_id for r in rows} == set(expected)
    for r in rows:  # the same answer as a ledger of the journals, plus the source
        assert r.status == expected[r.session_id].status and r.tokens == expected[r.session_id].tokens
        assert r.iteration == expected[r.session_id].iteration
        assert r.cost_usd == expected[r.session_id].cost_usd
    assert monitor.fleet() == local.fleet()
    assert monitor.iterations("thrashing") == local.iterations("thrashing")
    assert monitor.heat("thrashing") == local.heat("thrashing")
    assert monitor.events("thrashing") == local.events("thrashing")
    assert (
        monitor.query("SELECT source, count(*) AS n FROM events GROUP BY ALL ORDER BY 1").rows[0][0]
        == "alpha"
    )
    hint = monitor.steering_hint("thrashing")
    assert "\n" not in hint and "needs the session's own home" in hint
    source = monitor.sessions(["thrashing"])[0].source
    assert f"ralph-ledger --home {homes[source].root} stop thrashing" in hint
    assert monitor.refresh().sessions == []  # nothing changed


def test_a_source_exported_again_is_read_again(fleet: tuple[Path, dict[str, Home]]) -> None:
    dest, homes = fleet
    monitor = loaded(dest)
    add_session(homes["beta"], "tdd-success", "beta-new")
    export(homes["beta"], dest, "beta")
    update = monitor.refresh()
    assert update.sessions == ["beta-new"]  # only the session that changed
    assert any(a.session_id == "beta-new" and a.kind == "completed" for a in update.alerts)
    assert [r.source for r in monitor.sessions(["beta-new"])] == ["beta"]
    shutil.rmtree(dest / "events" / "source=gamma")  # a source removed leaves the view
    assert monitor.refresh().sessions == []  # (at the second look: it may be in the middle of a swap)
    update = monitor.refresh()
    assert update.sessions and not monitor.sessions(update.sessions)
    assert {r.source for r in monitor.sessions()} == {"alpha", "beta"}


def test_a_source_swapped_in_meanwhile_is_neither_dropped_nor_alerted_twice(
    fleet: tuple[Path, dict[str, Home]],
) -> None:
    dest, homes = fleet
    monitor = loaded(dest)
    before = monitor.sessions()
    folder, aside = dest / "events" / "source=beta", dest / ".staging" / "beta-aside"
    folder.rename(aside)  # an export between its two renames
    assert monitor.refresh().sessions == [] and monitor.sessions() == before
    aside.rename(folder)
    assert monitor.refresh().sessions == [] and monitor.sessions() == before
    add_session(homes["beta"], "tdd-success", "beta-new")
    export(homes["beta"], dest, "beta")
    assert [a.kind for a in monitor.refresh().alerts if a.session_id == "beta-new"] == ["completed"]
    day = next((folder).glob("day=*"))  # a day partition missing while it is replaced, then back
    day.rename(aside)
    monitor.refresh()
    aside.rename(day)
    update = monitor.refresh()
    assert update.sessions and update.alerts == []  # its sessions read again, their alerts not raised again


def test_a_damaged_partition_is_one_line_and_keeps_the_rows_read(fleet: tuple[Path, dict[str, Home]]) -> None:
    dest, _ = fleet
    monitor = loaded(dest)
    before = monitor.sessions()
    part = next((dest / "events" / "source=alpha").glob("day=*/*.parquet"))
    tmp = part.with_name("new.tmp")
    tmp.write_bytes(b"not parquet at all")
    tmp.replace(part)
    update = monitor.refresh()
    assert len(update.bad_lines) == 1 and "\n" not in update.bad_lines[0]
    assert str(dest / "events" / "source=alpha") in update.bad_lines[0]
    assert monitor.sessions() == before
    assert monitor.refresh().bad_lines == []  # said once
    fresh = DatasetMonitor(dest)  # at start-up: the other sources load, the damage is reported
    list(fresh.load())
    assert {r.source for r in fresh.sessions()} == {"beta", "gamma"}
    assert len(fresh.bad_lines()) == 1


def test_the_first_source_s_latest_sessions_come_first(
    fleet: tuple[Path, dict[str, Home]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first screen sooner: the first batch is the most recent sessions of the source exported
    last (here beta, exported again whole: an export with nothing new writes nothing)."""
    monkeypatch.setattr(dataset, "FIRST_BATCH", 2)
    dest, homes = fleet
    export(homes["beta"], dest, "beta", "--full")
    monitor = DatasetMonitor(dest)
    batches = [p.sessions for p in monitor.load()]
    beta = [r for r in monitor.sessions() if r.source == "beta"]  # most recently active first
    assert len(batches) == len(SOURCES) + 1
    assert batches[0] == sorted(r.session_id for r in beta[:2])
    assert sorted(batches[0] + batches[1]) == sorted(r.session_id for r in beta)


def test_not_a_dataset_or_an_empty_one_is_one_line(tmp_path: Path) -> None:
    for path, words in (
        (tmp_path / "missing", "no such directory"),
        (tmp_path, "not an exported dataset"),
    ):
        with pytest.raises(LedgerError, match=words) as caught:
            dataset_sources(path)
        assert "\n" not in str(caught.value)
    (tmp_path / "events").mkdir()
    with pytest.raises(LedgerError, match="an empty dataset"):
        DatasetMonitor(tmp_path)
