"""The source points at the manual, and the manual's references resolve (issue 24).

- A module docstring says what the module holds in at most 10 lines; a longer read belongs in
  ``docs/`` (the rules in ``docs/design/``), which the docstring points to.
- No file under ``ledger/`` or ``tui/`` names a design seed: the seeds are not in this repository,
  and the rules the code follows are written in ``docs/design/``.
- Every repository path named in the manual (``docs/*.md``, ``docs/design/*.md``) or in a comment or
  docstring of ``ledger/`` and ``tui/`` exists, and every link or pointer to a page of the manual
  names a page and a heading that exist.
- ``docs/index.md`` lists every page of the manual.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Final
from urllib.parse import unquote

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = ROOT / "docs"
MAX_DOCSTRING_LINES: Final = 10

TOP: Final = frozenset(
    {"ledger", "tui", "tests", "bench", "docs", "sample_sessions", "snapshots", "clients", ".ci"}
)
"""The folders of the repository a path in the manual or a comment starts with."""

OUTSIDE: Final = frozenset({"shared"})
"""Folders that are not in the repository: a path naming one is dangling for every reader."""

EXAMPLES: Final[dict[str, str]] = {
    "bench/out/": "where the benches cache what they generate: made by the first run, ignored by git",
    "ledger/storage/sql/views/NAME.sql": "the pattern of a view's file (docs/design/architecture.md)",
    "ledger/cli/*_commands.py": "the pattern of the CLI's command modules (docs/design/architecture.md)",
    "tests/fixtures/clients/<client>-<version>/": "a client's captures (docs/design/clients.md)",
    "tests/stop-hook.test.sh": "a file of the official ralph-loop plugin's repository, not of this one",
}
"""Paths named as patterns or as files of another repository, and why each may not exist here."""

EXAMPLE_NAMES: Final = frozenset({"NAME.md", "00-events.sql", "00-model_prices.sql", "spark.sql"})
"""File names that stand for a user's or a dataset's files: an agent definition, a dataset's views."""

SEED: Final = re.compile(
    r"\b[Ss]eeds?\s+0\d\d\b|\bshared/seeds\b|\b[Tt]he seeds?\b|\b[Ss]eed's\b|\b[Ss]eeds'"
)
"""A reference to a design seed: ``seed 000``, ``seeds 003``, ``the seeds``, ``seed's``, ``shared/seeds``."""
NAMED_IN_THE_MANUAL: Final = re.compile(SEED.pattern + r"|\b[Dd]esign seeds?\b")
"""As ``SEED``, and ``the design seeds``: how the one sentence of the manual that may name them does."""

TICKED: Final = re.compile(r"`{1,2}([^`\s][^`]*?)`{1,2}")
POINTER: Final = re.compile(r"(?<![\w/.])(docs/[\w./-]+\.md)(?:#([\w-]+))?")
"""A pointer to a page of the manual in a comment or docstring: ``docs/design/guards.md#circuit-breaker``."""
LINK: Final = re.compile(r"\]\(([^)\s]+)\)")


def modules(*folders: str) -> Iterator[Path]:
    """Every Python file under ``folders``."""
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def pages() -> list[Path]:
    """Every page of the manual."""
    return sorted([*DOCS.glob("*.md"), *(DOCS / "design").glob("*.md")])


def docstring_lines(source: str) -> int:
    """How many lines the module docstring of ``source`` has (0: none)."""
    doc = ast.get_docstring(ast.parse(source), clean=False)
    return len(doc.strip("\n").splitlines()) if doc else 0


def prose(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every triple-quoted string (docstrings) of ``source``."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        docstring = tok.type == tokenize.STRING and tok.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        if tok.type == tokenize.COMMENT or docstring:
            yield tok.start[0], tok.string


def markdown(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every line of a markdown page outside its fenced blocks."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield n, line


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (a repeated one gets ``-1``, ``-2``, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in markdown(page.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


@cache
def file_names() -> frozenset[str]:
    """The name of every file and folder of the repository."""
    return frozenset(
        {p.name for folder in TOP for p in (ROOT / folder).rglob("*")} | {p.name for p in ROOT.iterdir()}
    )


def missing_paths(text: str) -> list[str]:
    """The repository paths named in backticks in ``text`` that do not exist (examples aside)."""
    names = file_names()
    bad = []
    for m in TICKED.finditer(text):
        token = m.group(1).strip().split("::")[0].rstrip(":,.")
        if " " in token or token in EXAMPLES:
            continue
        first = token.split("/")[0]
        if "/" in token and first in OUTSIDE:
            bad.append(f"{token} (not in this repository)")
        elif "/" in token and first in TOP:
            path = token.split("#")[0]
            if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                bad.append(token)
        elif re.fullmatch(r"[\w-]+\.(py|sql|md)", token) and token not in names | EXAMPLE_NAMES:
            bad.append(f"{token} (no file of that name)")
    return bad


def broken_pointer(target: Path, anchor: str | None) -> str | None:
    """Why a pointer to ``target`` (and ``anchor``) does not resolve, or ``None``."""
    if not target.exists():
        return "no such page"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"no heading #{anchor}"
    return None


# --- the rules, shown on samples ------------------------------------------------------------------


def test_a_long_module_docstring_is_counted() -> None:
    short = '"""One line.\n\nA second paragraph."""\n'
    long = '"""Title.\n' + "line\n" * 10 + '"""\n'
    assert (docstring_lines(short), docstring_lines(long), docstring_lines("x = 1\n")) == (3, 11, 0)


def test_seed_references_are_found() -> None:
    for said in (
        "(seed 000 §3.2)",
        "Seed 002's validators",
        "seeds 003/004",
        "shared/seeds/",
        "the seeds agree",
    ):
        assert SEED.search(said), said
    for fine in ("--seed 42", "random.seed(SEED)", "seeded generator", "(seed {SEED})"):
        assert not SEED.search(fine), fine


def test_a_dangling_path_is_found() -> None:
    text = (
        "`tests/test_hooks.py`, ``ledger/loop/step.py``, `shared/fixtures/x`, `steering_events.py`, `a b/c`"
    )
    assert missing_paths(text) == [
        "tests/test_hooks.py",
        "shared/fixtures/x (not in this repository)",
        "steering_events.py (no file of that name)",
    ]


def test_headings_make_github_anchors() -> None:
    assert slug("Checkpoints (`ledger/loop/checkpoints.py`)") == "checkpoints-ledgerloopcheckpointspy"
    assert slug("3. The block cap") == "3-the-block-cap"
    assert slug("validate_completion") == "validate_completion"


# --- the source and the manual --------------------------------------------------------------------


def test_module_docstrings_are_at_most_ten_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in modules("ledger", "tui", "bench")
        if (n := docstring_lines(path.read_text(encoding="utf-8"))) > MAX_DOCSTRING_LINES
    ]
    assert not long, (
        f"module docstrings over {MAX_DOCSTRING_LINES} lines (move the long read to docs/):\n"
        + "\n".join(long)
    )


def test_no_source_file_names_a_seed() -> None:
    files = [p for folder in ("ledger", "tui") for p in sorted((ROOT / folder).rglob("*")) if p.is_file()]
    assert len(files) > 100
    named = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        if path.suffix in {".py", ".sql", ".md", ".tcss", ".toml", ".json"}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SEED.search(line)
    ]
    assert not named, "the seeds are not in this repository; point to docs/design/ instead:\n" + "\n".join(
        named
    )


def test_the_manual_names_the_seeds_once() -> None:
    named = [
        f"{page.relative_to(ROOT)}:{n}"
        for page in pages()
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if NAMED_IN_THE_MANUAL.search(line)
    ]
    assert len(named) == 1 and named[0].startswith("docs/index.md:"), (
        f"only docs/index.md says where the rules come from: {named}"
    )


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_paths_and_links_in_the_manual_exist(page: Path) -> None:
    bad = []
    for n, line in markdown(page.read_text(encoding="utf-8")):
        bad += [f"{n}: `{token}`" for token in missing_paths(line)]
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            why = broken_pointer((page.parent / unquote(path)).resolve() if path else page, anchor or None)
            if why:
                bad.append(f"{n}: ({target}): {why}")
    assert not bad, f"{page.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_paths_and_pointers_in_source_comments_exist() -> None:
    bad = []
    for path in modules("ledger", "tui"):
        for n, text in prose(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(ROOT)}:{n}"
            bad += [f"{where}: {token}" for token in missing_paths(text)]
            for page, anchor in POINTER.findall(text):
                why = broken_pointer(ROOT / page, anchor or None)
                if why:
                    bad.append(f"{where}: {page}{'#' + anchor if anchor else ''}: {why}")
    for sql in sorted((ROOT / "ledger").rglob("*.sql")):
        for n, line in enumerate(sql.read_text(encoding="utf-8").splitlines(), 1):
            for page, anchor in POINTER.findall(line) if line.lstrip().startswith("--") else []:
                why = broken_pointer(ROOT / page, anchor or None)
                if why:
                    bad.append(f"{sql.relative_to(ROOT)}:{n}: {page}#{anchor}: {why}")
    assert not bad, "dangling references in comments and docstrings:\n" + "\n".join(bad)


def test_the_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = {(DOCS / target).resolve() for target in LINK.findall(index) if target.endswith(".md")}
    unlisted = [
        str(p.relative_to(DOCS)) for p in pages() if p.name != "index.md" and p.resolve() not in listed
    ]
    assert not unlisted, f"docs/index.md does not list: {unlisted}"
