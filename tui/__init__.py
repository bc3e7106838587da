"""ralph-tui: a Textual terminal monitor for ralph-ledger.

Built only on ledger's public API (``ledger``, ``ledger.monitor``, ``ledger.monitor.replay``); ``ledger``
itself never imports Textual.
"""

import ledger  # noqa: F401  (first: in ralph-tui, Ctrl-C while Textual loads is one line, not a traceback)
