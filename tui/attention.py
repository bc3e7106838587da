"""Getting a person's attention through the terminal when an alert is raised (``ralph-tui --bell``,
``--osc-notify 9|777``): the terminal bell, and a desktop notification by escape sequence, OSC 9
(iTerm2, WezTerm, Windows Terminal, kitty, foot, Ghostty) or OSC 777 (rxvt-unicode, VTE terminals
such as GNOME Terminal, Ghostty, WezTerm). A terminal that knows neither ignores them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

OscKind = Literal[9, 777]
OSC_KINDS: Final[tuple[OscKind, ...]] = (9, 777)
BEL: Final = "\a"
TEXT_LIMIT: Final = 200
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


@dataclass(frozen=True)
class Attention:
    """What an alert does besides its toast: ring the ``bell``, send an ``osc`` desktop notification."""

    bell: bool = False
    osc: OscKind | None = None

    def sequence(self, kind: str, message: str) -> str:
        """What to write to the terminal for one alert (``kind``: completed, blocked, escalated, guard)
        saying ``message``; ``""`` when nothing is asked for."""
        title = clean(f"ralph-tui: {kind}")
        body = clean(message)
        out = BEL if self.bell else ""
        if self.osc == 9:
            out += f"\x1b]9;{title}: {body}{BEL}"
        elif self.osc == 777:
            out += f"\x1b]777;notify;{title.replace(';', ',')};{body}{BEL}"
        return out


def clean(text: str) -> str:
    """``text`` fit for an escape sequence: no control characters (which would end it early or
    inject another), whitespace folded, at most ``TEXT_LIMIT`` characters."""
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"
