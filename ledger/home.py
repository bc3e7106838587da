"""Where a ledger lives: ``--home``, else ``$RALPH_HOME``, else ``./.ralph``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOME = ".ralph"


@dataclass(frozen=True, slots=True)
class Home:
    root: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None) -> Home:
        chosen = home if home is not None else os.environ.get("RALPH_HOME") or DEFAULT_HOME
        return cls(Path(chosen).expanduser().absolute())

    @property
    def journals(self) -> Path:
        return self.root / "journals"

    @property
    def database(self) -> Path:
        return self.root / "ledger.duckdb"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def journal_files(self) -> list[Path]:
        if not self.journals.is_dir():
            return []
        with os.scandir(self.journals) as it:
            names = sorted(e.name for e in it if e.name.endswith(".jsonl") and e.is_file())
        return [self.journals / n for n in names]

    def ensure(self) -> None:
        for d in (self.root, self.journals, self.tmp):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
