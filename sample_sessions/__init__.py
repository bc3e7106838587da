"""Recorded sample sessions (``*.jsonl``) and the script that records them (``record.py``)."""
