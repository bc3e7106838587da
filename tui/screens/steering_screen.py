"""The base of the screens that show a session they can steer: ``P`` pauses or resumes its loop, ``g``
steers it, ``u`` unblocks it. Each key posts ``SteerLoop`` up to the app (tui/steering.py acts on it)."""

from __future__ import annotations

from typing import Final

from textual.binding import Binding, BindingType
from textual.screen import Screen

from tui.messages import SteerLoop

STEERING_KEYS: Final[list[BindingType]] = [
    Binding("P", "pause_loop", "Pause loop", tooltip="Pause the loop, or resume it when paused"),
    Binding("g", "steer_loop", "Steer", tooltip="Guidance for the loop's next prompt"),
    Binding("u", "unblock_loop", "Unblock", tooltip="Unblock the loop: 5 more iterations"),
]
"""The steering keys, which each screen lists after its own (so the footer shows them after those;
tui/widgets/footer.py makes room for them, less needed keys giving way)."""


class SteeringScreen(Screen[None]):
    """A screen showing a session it can steer (``steering_target``): the steering keys'
    actions (its ``BINDINGS`` end with ``STEERING_KEYS``)."""

    def steering_target(self) -> str | None:
        """The session the keys act on (``None``: none)."""
        raise NotImplementedError

    def _ask(self, action: str) -> None:
        if (sid := self.steering_target()) is not None:
            self.post_message(SteerLoop(sid, action))

    def action_pause_loop(self) -> None:
        """Pause the session's loop, or resume it when paused."""
        self._ask("pause")

    def action_steer_loop(self) -> None:
        """Ask for guidance for the loop's next iteration."""
        self._ask("steer")

    def action_unblock_loop(self) -> None:
        """Ask for the guidance an unblocked loop goes on with."""
        self._ask("unblock")
