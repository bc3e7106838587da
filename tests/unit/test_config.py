"""Configuration files: ralph.toml, [tool.ralph], agent frontmatter; one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.loop.config.loop_config import (
    ConfigError,
    LoopConfig,
    config_path,
    find_config,
    has_config,
    load_agent,
    load_checked,
    load_toml,
    promise_word,
)

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
        (
            "max_iterations = 'soon'\n",
            "ralph.toml: max_iterations: expected a whole number >= 1 or \"auto\", got 'soon'",
        ),
        (
            "[guards.thrashing]\nmin_iterations = 'five'\n",
            "ralph.toml: guards.thrashing.min_iterations: expected an integer, got 'five'",
        ),
        (
            "[guards.thrashing]\nthreshold = 5\n",
            "ralph.toml: guards.thrashing.threshold: unknown key",
        ),
        ("max_iterations = \n", "ralph.toml: not valid TOML: "),
        (
            "on_task_blocked = 'pause'\n",
            "ralph.toml: on_task_blocked: expected one of 'skip', 'stop', got 'pause'",
        ),
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
            "iteration.maxIterations: expected a whole number >= 1 or \"auto\", got 'many'",
        ),
        ("---\niteration:\n  maxIters: 3\n---\n", "iteration.maxIters: unknown key"),
        (
            "---\niteration:\n  maxIterations: 0\n---\n",
            'iteration.maxIterations: expected a whole number >= 1 or "auto", got 0',
        ),
        (
            "---\niteration:\n  validationRules: [nope]\n---\n",
            "iteration.validationRules[0]: no rule named 'nope'",
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


# ----------------------------------------------------------------------------- one discovery, checked in full
@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({}, None),
        ({"ralph.toml": ""}, "ralph.toml"),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, None),  # a Python project, no loop configuration
        ({"pyproject.toml": "[tool.ralph]\nmax_iterations = 7\n"}, "pyproject.toml"),
        ({"pyproject.toml": "[tool.ralph\n"}, "pyproject.toml"),  # broken: loading it says why
        ({"ralph.toml": "", "pyproject.toml": "[tool.ralph]\n"}, "ralph.toml"),
    ],
)
def test_config_path_is_what_find_config_and_has_config_read(
    tmp_path: Path, files: dict[str, str], found: str | None
) -> None:
    """One discovery rule: ``has_config`` (which picks ``loop start``'s mode) and ``find_config`` (which
    the runner and the hook load) agree on every project; they used to differ on a ``pyproject.toml``
    without ``[tool.ralph]`` (loaded) and a broken one (ignored by one, an error for the other)."""
    for name, text in files.items():
        write(tmp_path / name, text)
    assert config_path(tmp_path) == (tmp_path / found if found else None)
    assert has_config(tmp_path) is (found is not None)
    if found == "pyproject.toml" and "max_iterations" not in files["pyproject.toml"]:
        with pytest.raises(ConfigError, match=r"pyproject.toml: not valid TOML"):
            find_config(tmp_path)
    elif found is None:
        assert find_config(tmp_path) == LoopConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_iterations = 0\n", 'ralph.toml: max_iterations: expected a whole number >= 1 or "auto", got 0'),
        (
            "max_iterations = -3\n",
            'ralph.toml: max_iterations: expected a whole number >= 1 or "auto", got -3',
        ),
        (
            "hooks = ['default', 'valdation']\n",
            "ralph.toml: hooks[1]: unknown hook 'valdation' (expected one of: default, promise, validation)",
        ),
        (
            "completion_promises = ['DONE', ' ']\n",
            "ralph.toml: completion_promises[1]: expected a promise word",
        ),
        (
            "[[rules]]\nname = 'p'\ntype = 'content_pattern'\npattern = 'ok('\n",
            "ralph.toml: rules[0].pattern: invalid regular expression 'ok(': missing ), unterminated",
        ),
        (
            "[guards.circuit_breaker]\nthreshold = 0\n",
            "ralph.toml: guards.circuit_breaker.threshold: expected a whole number >= 1, got 0",
        ),
        (
            "[guards.circuit_breaker]\nreset_timeout_s = -1.0\n",
            "guards.circuit_breaker.reset_timeout_s: expected a finite number of seconds > 0, got -1.0",
        ),
        (
            "[guards.time_limit]\nseconds = 0\n",
            "guards.time_limit.seconds: expected a finite number of seconds > 0, got 0",
        ),
        (
            "[guards.time_limit]\nseconds = nan\n",
            "guards.time_limit.seconds: expected a finite number of seconds > 0, got nan",
        ),
        (
            "[guards.thrashing]\nmin_iterations = -2\n",
            "guards.thrashing.min_iterations: expected a whole number >= 1, got -2",
        ),
        (
            "[guards.validation_stall]\nspan = 0\n",
            "guards.validation_stall.span: expected a whole number >= 1, got 0",
        ),
        (
            "[guards.quality_regression]\nspan = 1\n",
            "guards.quality_regression.span: expected a whole number >= 2",
        ),
        (
            "[guards.quality_regression]\nmin_drop = -5.0\n",
            "guards.quality_regression.min_drop: expected a number >= 0, got -5.0",
        ),
        (
            "[guards.error_threshold]\nlimit = 0\n",
            "guards.error_threshold.limit: expected a whole number >= 1, got 0",
        ),
        (
            "[guards.token_budget]\nenabled = true\n",
            "guards.token_budget.tokens: expected a whole number >= 1, got 0",
        ),
        (
            "[guards.context_window]\nenabled = true\nmax_fraction = 1.5\n",
            "guards.context_window.max_fraction: expected a fraction > 0 and <= 1, got 1.5",
        ),
        (
            "[guards.context_window]\nmax_fraction = 0.5\n",
            "guards.context_window.max_fraction: never takes effect while "
            "guards.context_window.enabled is false",
        ),
        (
            "[guards.cost_budget]\nenabled = true\n",
            "guards.cost_budget.max_cost_usd: expected a number of US dollars > 0, got 0.0",
        ),
        (
            "[guards.cost_budget]\nenabled = true\nmax_cost_usd = -2\n",
            "guards.cost_budget.max_cost_usd: expected a number of US dollars > 0, got -2.0",
        ),
        (
            "[guards.cost_budget]\nmax_cost_usd = 5\n",
            "guards.cost_budget.max_cost_usd: never takes effect while guards.cost_budget.enabled is false",
        ),
        (
            "[guards.token_budget]\ntokens = 100000\n",
            "guards.token_budget.tokens: never takes effect while guards.token_budget.enabled is false",
        ),
        (
            "[guards.thrashing]\nenabled = false\nmin_iterations = 3\n",
            "guards.thrashing.min_iterations: never takes effect while guards.thrashing.enabled is false",
        ),
    ],
)
def test_settings_that_would_fail_or_never_apply_are_errors(tmp_path: Path, text: str, message: str) -> None:
    """Every setting that would fail once a loop runs, or could never take effect, is one line naming
    the file, the key and what is expected, at load time (they used to load silently)."""
    write(tmp_path / "ralph.toml", text)
    with pytest.raises(ConfigError) as caught:
        find_config(tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / 'ralph.toml'}: ")


def test_checks_name_the_pyproject_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.ralph]\nhooks = ['nope']\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: tool.ralph.hooks\[0\]: unknown hook 'nope'"):
        find_config(tmp_path)


def test_sound_settings_pass_the_checks(tmp_path: Path) -> None:
    """Disabling a guard alone, default thresholds, a valid regex and every preset hook are fine."""
    text = RALPH + "[guards.thrashing]\nenabled = false\n[guards.max_stop_retries]\nlimit = 5\n"
    text = "hooks = ['default', 'promise', 'validation']\n" + text.replace('hooks = ["default"]\n', "")
    text += "[[rules]]\nname = 'p'\ntype = 'content_pattern'\npattern = '^ok$'\n"
    write(tmp_path / "ralph.toml", text)
    assert find_config(tmp_path).guards.max_stop_retries.limit == 5  # the hook's check: it applies there


def test_the_runner_refuses_stop_retry_settings(tmp_path: Path) -> None:
    """``max_stop_retries`` counts stops blocked within one iteration: the loop runner never blocks a
    stop, so settings for it can never take effect there."""
    path = write(tmp_path / "ralph.toml", "[guards.max_stop_retries]\nlimit = 5\n")
    assert load_checked(path).guards.max_stop_retries.limit == 5
    with pytest.raises(
        ConfigError, match=r"guards.max_stop_retries.limit: never takes effect in `ralph-ledger run`"
    ):
        load_checked(path, runner=True)


def test_the_runner_refuses_exclusive_promises_with_none_listed(tmp_path: Path) -> None:
    """``exclusive_promises = true`` with an empty ``completion_promises``: no promise could complete a
    runner loop (it ran to its iteration limit and escalated). The hook accepts it: ``loop start
    --completion-promise`` gives the loop its phrase."""
    path = write(tmp_path / "ralph.toml", "exclusive_promises = true\ncompletion_promises = []\n")
    assert load_checked(path).exclusive_promises
    with pytest.raises(ConfigError) as caught:
        load_checked(path, runner=True)
    assert str(caught.value) == (
        f"{path}: completion_promises: expected at least one promise word while exclusive_promises is true "
        "(nothing could complete the loop)"
    )
