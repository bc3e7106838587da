"""Widgets the screens share: the virtual table and the charts."""
