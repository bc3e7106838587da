"""Amounts of money as shown to a person (no heavy imports: the Stop hook's guards use it)."""

from __future__ import annotations

import math


def usd(value: float | None) -> str:
    """A cost in US dollars: ``$0.0123`` (four decimals; from $100 on, ``$1,234.50``), ``-`` when
    it is not known."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"${value:,.2f}" if abs(value) >= 100 else f"${value:.4f}"
