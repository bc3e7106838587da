"""``verify``: check the hash chain of every journal (or one session's) and name the first line where
one breaks (docs/verify.md); what it finds is recorded in the ledger, which ``sessions`` shows."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ledger.cli.common import CliError, emit, report_ingest, unknown_session
from ledger.core.home import Home
from ledger.core.words import plural

if TYPE_CHECKING:
    import argparse

    from ledger.storage.chain import Known
    from ledger.storage.database import Ledger


def cmd_verify(home: Home, args: argparse.Namespace) -> None:
    """``verify [SESSION]``: one line per session whose chain is broken (``SESSION: line N: how``),
    exit 1 if any is; else one line saying how many sessions and lines were checked."""
    from pathlib import Path

    from ledger.storage.chain import check_journal
    from ledger.storage.journal import journal_path, read_range

    if args.session:
        files = [journal_path(home.journals, args.session)]
        if not files[0].exists():
            raise unknown_session(args.session, home)
    else:
        files = home.journal_files() if home.journals.exists() else []
    ledger = _ledger(home, args.wait)
    try:
        known = _known(ledger) if ledger is not None else {}
        if ledger is not None:
            report_ingest(ledger.ingest(files))
        verdicts = [check_journal(str(p), read_range(p), known.get(p.name)) for p in files]
        broken = [(Path(v.path).stem, v.broken) for v in verdicts if v.broken]
        if ledger is not None:
            _record(ledger, broken)
    finally:
        if ledger is not None:
            ledger.close()
    for session, where in broken:
        emit(f"{session}: {where}\n")
    if broken:
        raise CliError(
            f"ralph-ledger: verify: {plural(len(broken), 'session')} of {len(verdicts)} "
            "with a broken hash chain"
        )
    lines = sum(v.lines for v in verdicts)
    unlinked = lines - sum(v.linked for v in verdicts)
    older = f" ({plural(unlinked, 'line')} written before the chain: no link)" if unlinked else ""
    emit(
        f"verify: {plural(len(verdicts), 'session')}, {plural(lines, 'line')} checked; "
        f"every chain holds{older}\n"
    )


def _ledger(home: Home, wait: float) -> Ledger | None:
    """The home's ledger file, to learn what it read before and record what is found; ``None`` (said
    on stderr) when it cannot be written: the journals are checked all the same."""
    from ledger.core.errors import LedgerError
    from ledger.storage.database import Ledger

    if not home.root.exists():
        return None
    try:
        ledger = Ledger.open(home, wait=wait, fallback=True)
    except LedgerError as exc:
        print(f"ralph-ledger: verify: the ledger is not used ({exc})", file=sys.stderr)
        return None
    if ledger.path is None:
        ledger.close()
        return None
    return ledger


def _known(ledger: Ledger) -> dict[str, Known]:
    """What the ledger read of each journal before (a cut or edited tail shows against it)."""
    from ledger.storage.chain import Known

    rows = ledger.con.execute(
        "SELECT journal, byte_offset, chain_last, last_seq FROM ingest_positions WHERE chain_last <> ''"
    ).fetchall()
    return {r[0]: Known(int(r[1]), str(r[2]), int(r[3])) for r in rows}


def _record(ledger: Ledger, broken: list[tuple[str, str]]) -> None:
    """Mark the sessions found broken in the ledger (a break the ingest named first is kept), and
    compute their kept ``sessions`` rows again."""
    from ledger.storage import materialized

    if not broken:
        return
    con = ledger.con
    con.execute("BEGIN TRANSACTION")
    try:
        for session, where in broken:
            con.execute(
                "UPDATE ingest_positions SET chain_break = ? "
                "WHERE session_id = ? AND coalesce(chain_break, '') = ''",
                [where, session],
            )
        if ledger.materialized:
            materialized.refresh(con, [s for s, _ in broken])
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
