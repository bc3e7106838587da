"""Configuration files: ralph.toml, [tool.ralph], agent frontmatter; one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.config import ConfigError, LoopConfig, find_config, load_agent, load_toml, promise_word

RALPH = """
max_iterations = 12
hooks = ["default"]
require_passing_validation = true

[[rules]]
name = "tests_pass"
type = "command"
argv = ["pytest", "-q"]

[[rules]]
name = "lint_clean"
type = "command"
argv = ["ruff", "check", "."]
cadence = "moderate"

[guards.circuit_breaker]
threshold = 4

[guards.token_budget]
enabled = true
tokens = 2000000
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_ralph_toml(tmp_path: Path) -> None:
    cfg = load_toml(write(tmp_path / "ralph.toml", RALPH))
    assert cfg.max_iterations == 12 and cfg.hooks == ["default"] and cfg.require_passing_validation
    assert [r["name"] for r in cfg.rules] == ["tests_pass", "lint_clean"]
    assert cfg.guards.circuit_breaker.threshold == 4 and cfg.guards.circuit_breaker.reset_timeout_s == 300
    assert cfg.guards.token_budget.enabled and cfg.guards.token_budget.tokens == 2_000_000
    assert cfg.guards.thrashing.min_iterations == 5


def test_pyproject_tool_ralph(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.ralph]\nmax_iterations = 7\n')
    assert find_config(tmp_path).max_iterations == 7


def test_ralph_toml_wins_over_pyproject(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ralph]\nmax_iterations = 7\n")
    write(tmp_path / "ralph.toml", "max_iterations = 9\n")
    assert find_config(tmp_path).max_iterations == 9


def test_defaults_without_files(tmp_path: Path) -> None:
    assert find_config(tmp_path) == LoopConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_iteration = 3\n", "ralph.toml: max_iteration: unknown key"),
        ("max_iterations = 'soon'\n", "ralph.toml: max_iterations: expected an integer, got 'soon'"),
        (
            "[guards.thrashing]\nmin_iterations = 'five'\n",
            "ralph.toml: guards.thrashing.min_iterations: expected an integer, got 'five'",
        ),
        (
            "[guards.thrashing]\nthreshold = 5\n",
            "ralph.toml: guards.thrashing.threshold: unknown key",
        ),
        ("max_iterations = \n", "ralph.toml: not valid TOML: "),
    ],
)
def test_errors_are_one_line_naming_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_toml(write(tmp_path / "ralph.toml", text))
    got = str(err.value).replace(str(tmp_path) + "/", "")
    assert got.startswith(message) and "\n" not in got


def test_pyproject_errors_name_the_table(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"pyproject.toml: tool.ralph.hooks: expected a list, got 'default'"
    ):
        load_toml(write(tmp_path / "pyproject.toml", "[tool.ralph]\nhooks = 'default'\n"))


AGENT = """---
name: me
description: Feature implementation with TDD iteration loops
model: sonnet
iteration:
  enabled: true
  maxIterations: 15
  completionPromises:
    - "<promise>COMPLETE</promise>"
    - "<promise>BLOCKED</promise>"
  validationRules:
    - lint_clean
    - tests_pass
---

# Engineer
"""


def test_agent_frontmatter(tmp_path: Path) -> None:
    base = load_toml(write(tmp_path / "ralph.toml", RALPH))
    cfg = load_agent(write(tmp_path / "me.md", AGENT), base)
    assert cfg.agent == "me" and cfg.max_iterations == 15
    assert cfg.completion_promises == ["COMPLETE", "BLOCKED"]
    assert [r["name"] for r in cfg.rules] == ["lint_clean", "tests_pass"]


def test_agent_defaults_per_agent(tmp_path: Path) -> None:
    qa = load_agent(write(tmp_path / "qa.md", "---\nname: qa\n---\n# QA\n"))
    assert qa.effective_max_iterations() == 10
    assert LoopConfig(agent="doc").effective_max_iterations() == 6
    assert LoopConfig(agent="unknown").effective_max_iterations() == 15
    assert LoopConfig(agent="qa", max_iterations=3).effective_max_iterations() == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "---\niteration:\n  maxIterations: many\n---\n",
            "iteration.maxIterations: expected an integer, got 'many'",
        ),
        ("---\niteration:\n  maxIters: 3\n---\n", "iteration.maxIters: unknown key"),
        (
            "---\niteration:\n  validationRules: [nope]\n---\n",
            "iteration.validationRules: no rule named 'nope'",
        ),
        ("---\n[unclosed\n---\n", "frontmatter is not valid YAML"),
        ("---\n- a\n- b\n---\n", "frontmatter: expected a mapping of keys, got list"),
    ],
)
def test_agent_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_agent(write(tmp_path / "a.md", text))
    assert message in str(err.value) and str(tmp_path / "a.md") in str(err.value)


def test_promise_word() -> None:
    assert promise_word("<promise>COMPLETE</promise>") == "COMPLETE"
    assert promise_word("  <PROMISE> all done </PROMISE> ") == "all done"
    assert promise_word("DONE") == "DONE"


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_toml(tmp_path / "missing.toml")
