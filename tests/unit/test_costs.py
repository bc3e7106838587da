"""Cost in dollars: ``turn_costs`` (the agent's reported cost, else tokens x genai-prices' prices),
summed by ``sessions`` and ``iterations``; ``model_prices`` filled at ingest, once per model."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from ledger import events as E
from ledger.core.home import Home
from ledger.storage.database import Ledger
from ledger.storage.journal import Journal

SONNET = "claude-sonnet-4-5-20250929"  # long-context prices above 200K input tokens
OPUS = "claude-opus-4-6"
GPT = "gpt-4o"


def library_price(model: str, t: E.TokenUsage) -> float:
    """The price genai-prices itself computes: its input tokens include the cache tokens."""
    usage = Usage(
        input_tokens=t.input + t.cache_read + t.cache_creation,
        cache_read_tokens=t.cache_read,
        cache_write_tokens=t.cache_creation,
        output_tokens=t.output,
    )
    price: Decimal = calc_price(usage, model_ref=model).total_price
    return float(price)


def record(home: Home, sid: str, *turns: E.Event) -> None:
    Journal.for_session(home.journals, sid, fsync=False).append(
        E.SessionStarted(session_id=sid, task="t"),
        E.IterationStarted(session_id=sid, iteration=1),
        *turns,
    )


TURNS = [
    (SONNET, E.TokenUsage(input=1200, output=800, cache_read=40_000, cache_creation=3_000)),
    (SONNET, E.TokenUsage(input=10, output=2_000, cache_read=230_000, cache_creation=500)),  # > 200K
    (OPUS, E.TokenUsage(input=5, output=300, cache_read=12_345, cache_creation=678)),
    (GPT, E.TokenUsage(input=1000, output=1000, cache_read=5_000)),
]


@pytest.mark.parametrize(("model", "tokens"), TURNS, ids=["sonnet", "sonnet-long", "opus", "gpt"])
def test_a_turns_cost_is_the_price_librarys_own(home: Home, model: str, tokens: E.TokenUsage) -> None:
    record(home, "a", E.AgentTurn(session_id="a", iteration=1, model=model, tokens=tokens))
    ledger = Ledger.memory(home)
    assert ledger.ingest().notes == []
    (row,) = ledger.rows("SELECT cost_usd, cost_reported FROM turn_costs")
    assert row["cost_reported"] is False
    assert row["cost_usd"] == pytest.approx(library_price(model, tokens), rel=1e-9)
    assert row["cost_usd"] > 0


def test_sessions_and_iterations_sum_the_turns(home: Home) -> None:
    turns = [
        E.AgentTurn(session_id="a", iteration=1 + i // 2, model=m, tokens=t) for i, (m, t) in enumerate(TURNS)
    ]
    record(home, "a", *turns[:2], E.IterationStarted(session_id="a", iteration=2), *turns[2:])
    ledger = Ledger.memory(home)
    ledger.ingest()
    by_iteration = {
        r["iteration"]: r["cost_usd"]
        for r in ledger.rows("SELECT iteration, cost_usd FROM iterations WHERE session_id = 'a'")
    }
    first = sum(library_price(m, t) for m, t in TURNS[:2])
    assert by_iteration[1] == pytest.approx(first, rel=1e-9)
    assert by_iteration[2] == pytest.approx(sum(library_price(m, t) for m, t in TURNS[2:]), rel=1e-9)
    (session,) = ledger.rows("SELECT cost_usd FROM sessions")
    assert session["cost_usd"] == pytest.approx(sum(library_price(m, t) for m, t in TURNS), rel=1e-9)


def test_the_cost_the_agent_reported_wins(home: Home) -> None:
    tokens = E.TokenUsage(input=100, output=100)
    record(
        home,
        "a",
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, tokens=tokens, cost_usd=1.25),
        E.AgentTurn(session_id="a", iteration=1, model="", tokens=tokens, cost_usd=0.5),
    )
    ledger = Ledger.memory(home)
    ledger.ingest()
    rows = ledger.rows("SELECT cost_usd, cost_reported FROM turn_costs ORDER BY seq")
    assert rows == [{"cost_usd": 1.25, "cost_reported": True}, {"cost_usd": 0.5, "cost_reported": True}]
    assert ledger.rows("SELECT cost_usd FROM sessions") == [{"cost_usd": 1.75}]


def test_an_unknown_model_costs_null_with_one_note(home: Home) -> None:
    tokens = E.TokenUsage(input=100, output=100)
    record(home, "a", E.AgentTurn(session_id="a", iteration=1, model="nonesuch-9", tokens=tokens))
    ledger = Ledger.memory(home)
    notes = ledger.ingest().notes
    assert len(notes) == 1 and "nonesuch-9" in notes[0] and "genai-prices" in notes[0]
    assert ledger.rows("SELECT cost_usd FROM turn_costs") == [{"cost_usd": None}]
    assert ledger.rows("SELECT cost_usd FROM sessions") == [{"cost_usd": None}]
    (price,) = ledger.rows("SELECT input, output, note FROM model_prices WHERE model = 'nonesuch-9'")
    assert price["input"] is None and price["output"] is None and price["note"] == notes[0]
    Journal.for_session(home.journals, "a", fsync=False).append(
        E.AgentTurn(session_id="a", iteration=1, model="nonesuch-9", tokens=tokens)
    )
    assert ledger.ingest().notes == []  # said once


def test_a_price_library_failure_never_fails_the_ingest(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    import genai_prices

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("invalid price data\nsecond line")

    monkeypatch.setattr(genai_prices, "calc_price", broken)
    record(home, "a", E.AgentTurn(session_id="a", iteration=1, model=OPUS, tokens=E.TokenUsage(output=9)))
    ledger = Ledger.memory(home)
    report = ledger.ingest()
    assert report.events == 3
    assert report.notes == [
        f"model {OPUS!r}: cannot price it: invalid price data (genai-prices {genai_prices.__version__}); "
        "its turns' cost is blank unless the agent reported one"
    ]
    assert ledger.rows("SELECT cost_usd FROM turn_costs") == [{"cost_usd": None}]


def test_a_turn_without_a_model_costs_null_and_old_lines_decode(home: Home) -> None:
    line = b'{"type":"agent_turn","session_id":"a","seq":1,"ts":"2025-12-30T10:01:00Z","iteration":1}\n'
    (home.journals / "a.jsonl").write_bytes(line)
    event = E.decode(line.strip())
    assert isinstance(event, E.AgentTurn) and event.model == "" and event.cost_usd is None
    ledger = Ledger.memory(home)
    assert ledger.ingest().notes == []
    assert ledger.rows("SELECT model, cost_usd FROM turn_costs") == [{"model": "", "cost_usd": None}]


def test_a_turn_that_reported_no_tokens_costs_null_not_zero(home: Home) -> None:
    """An agent that names its model but reports no tokens (Cursor's stream) spent an unknown amount:
    tokens x prices would say $0, a guess; a cost it reported still counts."""
    record(
        home,
        "a",
        E.AgentTurn(session_id="a", iteration=1, model=GPT),
        E.AgentTurn(session_id="a", iteration=1, model=GPT, cost_usd=0.25),
        E.AgentTurn(session_id="a", iteration=1, model=GPT, tokens=E.TokenUsage(output=10)),
    )
    ledger = Ledger.memory(home)
    assert ledger.ingest().notes == []
    costs = [r["cost_usd"] for r in ledger.rows("SELECT cost_usd FROM turn_costs ORDER BY seq")]
    assert costs[:2] == [None, 0.25]
    assert costs[2] == pytest.approx(library_price(GPT, E.TokenUsage(output=10)), rel=1e-9) and costs[2] > 0


def test_long_context_prices_apply_above_their_threshold(home: Home) -> None:
    """Two turns of one model, the same tokens but for the cache read that takes the second past
    200K input tokens: the second pays genai-prices' higher rate on every token."""
    small = E.TokenUsage(input=1000, output=1000, cache_read=150_000)
    large = E.TokenUsage(input=1000, output=1000, cache_read=250_000)
    record(
        home,
        "a",
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, tokens=small),
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, tokens=large),
    )
    ledger = Ledger.memory(home)
    ledger.ingest()
    got = [r["cost_usd"] for r in ledger.rows("SELECT cost_usd FROM turn_costs ORDER BY seq")]
    want = [library_price(SONNET, small), library_price(SONNET, large)]
    assert got == pytest.approx(want, rel=1e-9)
    assert want[1] / want[0] > 250 / 150  # the long-context rate, not only more tokens
    bands = ledger.rows("SELECT above FROM model_prices WHERE model = ? ORDER BY above", [SONNET])
    assert [b["above"] for b in bands] == [-1, 200_000]


def test_a_model_first_named_in_a_later_append_is_priced(home: Home) -> None:
    """A live tail's ingest looks only at the events it added (``IngestReport.seqs``) for new models."""
    record(home, "a", E.AgentTurn(session_id="a", iteration=1, model=OPUS, tokens=E.TokenUsage(output=9)))
    record(home, "b", E.AgentTurn(session_id="b", iteration=1, model=OPUS, tokens=E.TokenUsage(output=9)))
    ledger = Ledger.memory(home)
    ledger.ingest()
    tokens = E.TokenUsage(input=50, output=70)
    Journal.for_session(home.journals, "b", fsync=False).append(
        E.AgentTurn(session_id="b", iteration=1, model=GPT, tokens=tokens)
    )
    report = ledger.ingest(live=True)
    assert report.seqs == {"b": (3, 4)} and report.notes == []
    (row,) = ledger.rows("SELECT cost_usd FROM turn_costs WHERE model = ?", [GPT])
    assert row["cost_usd"] == pytest.approx(library_price(GPT, tokens), rel=1e-9)


def test_context_window_use_per_iteration(home: Home) -> None:
    """The last turn's context (its last request's input tokens, cache included) over the model's
    window as genai-prices knows it; NULL for a model without a known window."""
    record(
        home,
        "a",
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, context_tokens=40_000),
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, context_tokens=150_000),
        E.IterationStarted(session_id="a", iteration=2),
        E.AgentTurn(session_id="a", iteration=2, model="nonesuch-9", context_tokens=150_000),
        E.IterationStarted(session_id="a", iteration=3),
        E.AgentTurn(session_id="a", iteration=3, model=SONNET),  # no context said
    )
    window = calc_price(Usage(input_tokens=1), model_ref=SONNET).model.context_window
    assert window == 200_000
    ledger = Ledger.memory(home)
    ledger.ingest()
    rows = ledger.rows(
        "SELECT iteration, context_tokens, context_window, context_used FROM iterations ORDER BY iteration"
    )
    assert rows == [
        {"iteration": 1, "context_tokens": 150_000, "context_window": window, "context_used": 0.75},
        {"iteration": 2, "context_tokens": 150_000, "context_window": None, "context_used": None},
        {"iteration": 3, "context_tokens": None, "context_window": None, "context_used": None},
    ]


def test_rebuild_derives_the_prices_again(home: Home) -> None:
    record(home, "a", E.AgentTurn(session_id="a", iteration=1, model=OPUS, tokens=E.TokenUsage(output=9)))
    with Ledger.open(home) as ledger:
        ledger.ingest()
        ledger.con.execute("UPDATE model_prices SET output = 1")  # a stale or damaged price
        ledger.rebuild()
        (row,) = ledger.rows("SELECT cost_usd FROM turn_costs")
    assert row["cost_usd"] == pytest.approx(library_price(OPUS, E.TokenUsage(output=9)), rel=1e-9)


def test_the_stop_hooks_ledgers_never_import_the_price_library(tmp_path: Path) -> None:
    """With pricing off, as the Stop hook's processes have it, a session's in-memory ledger (``fold``:
    what the hook's engine reads) ingests turns that name a model without loading genai-prices
    (~160 ms); the cost_budget guard's facts load it; any other ledger's ingest prices them."""
    code = f"""
import sys
from pathlib import Path
from ledger import events as E
from ledger.core.home import Home
from ledger.loop.decide.facts import read_facts
from ledger.loop.decide.guards import CostBudget, GuardConfig
from ledger.storage import fold
from ledger.storage.journal import Journal
from datetime import datetime, UTC
fold.PRICES = False
home = Home.resolve(Path({str(tmp_path)!r}))
home.ensure()
j = Journal.for_session(home.journals, "a", fsync=False)
turn = E.AgentTurn(session_id="a", model="{OPUS}", tokens=E.TokenUsage(output=5))
j.append(E.SessionStarted(session_id="a"), turn)
ledger = fold.ledger_of(j.path, home)
print(ledger.rows("SELECT cost_usd FROM turn_costs"), "genai_prices" in sys.modules)
cfg = GuardConfig(cost_budget=CostBudget(enabled=True, max_cost_usd=1.0))
print(read_facts(ledger, "a", cfg, datetime.now(UTC)).cost_usd, "genai_prices" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, second, *_ = out.split("\n")
    assert first == "[{'cost_usd': None}] False"
    assert second == f"{library_price(OPUS, E.TokenUsage(output=5))} True"


def test_the_stop_hooks_entry_points_turn_pricing_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import io

    from ledger.drivers.claude_code.stop import hook, warm, warm_worker
    from ledger.storage import fold

    monkeypatch.setattr(fold, "PRICES", True)
    monkeypatch.setattr(warm, "served", lambda *a, **kw: None)  # no warm worker: in this process
    monkeypatch.setattr(hook, "main", lambda *a, **kw: 7 if fold.PRICES is False else 1)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"{}")))
    assert warm.hook_main() == 7
    monkeypatch.setattr(fold, "PRICES", True)
    monkeypatch.setattr(warm_worker, "serve", lambda *a, **kw: 7 if fold.PRICES is False else 1)
    assert warm_worker.main([str(tmp_path)]) == 7


# --- shown: show, sessions, stats, the Parquet export -----------------------------------------------


def costed_home(home: Home) -> float:
    """A session of two iterations, one priced turn each, and one session with an unknown model;
    returns the first session's cost as genai-prices computes it."""
    a = E.TokenUsage(input=1000, output=500, cache_read=20_000, cache_creation=1_000)
    b = E.TokenUsage(input=300, output=900, cache_read=60_000)
    record(
        home,
        "priced",
        E.AgentTurn(session_id="priced", iteration=1, model=SONNET, tokens=a),
        E.IterationStarted(session_id="priced", iteration=2),
        E.AgentTurn(session_id="priced", iteration=2, model=SONNET, tokens=b),
    )
    record(home, "unpriced", E.AgentTurn(session_id="unpriced", iteration=1, model="nonesuch-9", tokens=a))
    return library_price(SONNET, a) + library_price(SONNET, b)


def test_show_sessions_and_stats_print_the_cost(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    from ledger.cli import main

    total = costed_home(home)
    assert main(["--home", str(home.root), "show", "priced"]) == 0
    out, err = capsys.readouterr()
    assert f"cost ${total:.4f}" in out.splitlines()[0]
    assert "note: model 'nonesuch-9': no price known" in err  # the first ingest says it, once
    assert main(["--home", str(home.root), "show", "priced", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["iteration"] for r in rows] == [1, 2] and all(r["cost_usd"] > 0 for r in rows)
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(total, rel=1e-9)
    assert main(["--home", str(home.root), "show", "unpriced"]) == 0
    out, err = capsys.readouterr()
    assert "cost -" in out.splitlines()[0] and "note" not in err
    assert main(["--home", str(home.root), "sessions", "--json"]) == 0
    costs = {r["session_id"]: r["cost_usd"] for r in json.loads(capsys.readouterr().out)}
    assert costs["unpriced"] is None and costs["priced"] == pytest.approx(total, rel=1e-9)
    assert main(["--home", str(home.root), "stats", "--json"]) == 0
    (metrics,) = json.loads(capsys.readouterr().out)["loop_metrics"]
    assert metrics["cost_usd"] == pytest.approx(total, abs=1e-6)


def test_the_parquet_export_carries_the_costs(home: Home, tmp_path: Path) -> None:
    import duckdb

    from ledger.storage.export import export_parquet, views_bundle

    total = costed_home(home)
    with Ledger.open(home) as ledger:
        ledger.ingest()
        export_parquet(ledger, tmp_path / "fleet", "box")
    con = duckdb.connect()
    for _, sql in views_bundle():
        con.execute(sql.replace("'events/*/", f"'{tmp_path / 'fleet'}/events/*/"))
    got = dict(con.execute("SELECT session_id, cost_usd FROM sessions").fetchall())
    assert got["priced"] == pytest.approx(total, rel=1e-9) and got["unpriced"] is None


def test_schema_lists_the_cost_columns(capsys: pytest.CaptureFixture[str]) -> None:
    from ledger.cli import main

    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    views = {block.split("\n", 1)[0]: block for block in out.split("\nview ")}
    assert "turn_costs" in views and "  cost_usd                 DOUBLE" in views["turn_costs"]
    for view in ("sessions", "iterations", "loop_metrics"):
        assert "  cost_usd                 DOUBLE" in views[view], view
    assert "  context_used             DOUBLE" in views["iterations"]


def test_the_price_band_is_the_last_requests_not_the_turns_sum(home: Home) -> None:
    """A Claude Code turn of many small requests sums past 200K, but no request came near it: the
    band is chosen on its last request (``context_tokens``), so it pays the base rate; without that
    figure the sum is all there is."""
    tokens = E.TokenUsage(input=50, output=2_000, cache_read=230_000, cache_creation=500)
    record(
        home,
        "a",
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, tokens=tokens, context_tokens=40_000),
        E.AgentTurn(session_id="a", iteration=1, model=SONNET, tokens=tokens),
    )
    ledger = Ledger.memory(home)
    assert ledger.ingest().notes == []
    by_last, by_sum = (r["cost_usd"] for r in ledger.rows("SELECT cost_usd FROM turn_costs ORDER BY seq"))
    half = E.TokenUsage(input=25, output=1_000, cache_read=115_000, cache_creation=250)  # < 200K each
    assert by_last == pytest.approx(2 * library_price(SONNET, half), rel=1e-9)  # two base-band requests
    assert by_sum == pytest.approx(library_price(SONNET, tokens), rel=1e-9)  # one long-context request
    assert by_sum > by_last
