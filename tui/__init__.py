"""ralph-tui: a Textual terminal monitor for ralph-ledger.

Built only on ledger's public API (``ledger``, ``ledger.monitor``, ``ledger.replay``); ``ledger``
itself never imports Textual.
"""
