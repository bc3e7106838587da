"""The prices of the models the ledger's turns name: the ``model_prices`` table.

:func:`fill_prices` adds, after an ingest, one row per price band of each model the turns name that
the table does not hold yet, read from the maintained ``genai-prices`` library (never a table typed
by hand); a model it does not know gets NULL rates and a note, never a guess. The table is derived
like the rest of the ledger. Cost is defined once, in the ``turn_costs`` view. How the rates are
read, long-context tiers and import time: docs/cost.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from ledger.core.errors import one_line
from ledger.storage.ingest import bulk_insert

if TYPE_CHECKING:
    import duckdb

MODEL_PRICES_TABLE: Final = """CREATE TABLE IF NOT EXISTS model_prices (
         model VARCHAR, above BIGINT, input DOUBLE, output DOUBLE, cache_read DOUBLE,
         cache_write DOUBLE, context_window BIGINT, provider VARCHAR, price_model VARCHAR,
         prices_from VARCHAR, note VARCHAR)"""
"""One row per model (as the turns name it) and price band: rates in USD per token (NULL: not
known), for turns whose input tokens (cache included) exceed ``above`` (-1: the base band)."""

NARROW_AT_MOST: Final = 32
"""Sessions up to which ``fill_prices`` looks at an ingest's new events only (a live tail's)."""

COLUMNS: Final = [
    "model",
    "above",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "context_window",
    "provider",
    "price_model",
    "prices_from",
    "note",
]


def fill_prices(
    con: duckdb.DuckDBPyConnection, new: Mapping[str, tuple[int, int]] | None = None
) -> list[str]:
    """Add the prices of the models the turns name that ``model_prices`` lacks (one statement);
    returns one note per model the price library does not know. ``new`` (an ingest's ``seqs``:
    session -> last seq before and after) narrows the search to those events when they are few."""
    where = (
        "type IN ('agent_turn', 'subagent_stopped', 'model_tokens', 'rate_limited') AND model <> '' "
        "AND model NOT IN (SELECT model FROM model_prices)"
    )
    params: list[Any] = []
    if new is not None and len(new) <= NARROW_AT_MOST:
        if not new:
            return []
        where += " AND (" + " OR ".join(["(session_id = ? AND seq > ? AND seq <= ?)"] * len(new)) + ")"
        params = [v for sid, (lo, hi) in new.items() for v in (sid, lo, hi)]
    rows = con.execute(f"SELECT DISTINCT model FROM events WHERE {where} ORDER BY model", params).fetchall()
    if not rows:
        return []
    bands = [band for (model,) in rows for band in price_bands(str(model))]
    bulk_insert(con, "INSERT INTO model_prices", bands, COLUMNS)
    return [str(r[-1]) for r in bands if r[2] is None]


def library() -> str:
    """Where the prices come from: ``genai-prices <version>``."""
    from genai_prices import __version__

    return f"genai-prices {__version__}"


def price_bands(model: str) -> list[tuple[Any, ...]]:
    """The ``model_prices`` rows of ``model`` (in ``COLUMNS`` order), from genai-prices; one row of
    NULL rates and a note when the library does not know the model or cannot price it (an ingest
    never fails for a price)."""
    try:
        with warnings.catch_warnings():  # (the library warns of price keys it does not know)
            warnings.simplefilter("ignore")
            return _bands(model)
    except LookupError:
        why = "no price known"
    except Exception as exc:  # a price is never worth a failed ingest
        why = f"cannot price it: {one_line(exc)}"
    try:
        source = library()
    except ImportError:
        source = "genai-prices is not installed"
    note = f"model {model!r}: {why} ({source}); its turns' cost is blank unless the agent reported one"
    return [(model, -1, None, None, None, None, None, None, None, source, note)]


def _bands(model: str) -> list[tuple[Any, ...]]:
    from genai_prices import Usage, calc_price
    from genai_prices.types import TieredPrices

    def price(n: int, **usage: int) -> Decimal:
        return calc_price(Usage(input_tokens=n, **usage), model_ref=model).total_price

    base = calc_price(Usage(input_tokens=0), model_ref=model)
    tiers = {
        tier.start
        for value in vars(base.model_price).values()
        if isinstance(value, TieredPrices)
        for tier in value.tiers
    }
    fixed = base.total_price  # a price per request, if any: not per token, left out
    note = f"a price per request ({fixed} USD) is not counted" if fixed else ""
    rows = []
    for above in [-1, *sorted(tiers)]:
        n = max(above + 1, 1)  # a request of n input tokens is priced in this band
        plain = price(n) - fixed
        rates = (
            plain / n,
            (price(n, output_tokens=n) - fixed - plain) / n,
            (price(n, cache_read_tokens=n) - fixed) / n,
            (price(n, cache_write_tokens=n) - fixed) / n,
        )
        rows.append(
            (
                model,
                above,
                *(float(r) for r in rates),
                base.model.context_window,
                base.provider.id,
                base.model.id,
                library(),
                note,
            )
        )
    return rows
