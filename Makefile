# The developer's loop. `make test` is what .ci/run runs (everything); the others are parts of it.
# Every target uses the project's venv (.venv, made by `make venv` with every test extra: test, spark,
# browser); a venv with '.[test]' alone runs `make lint` and `make fast`.
PY := .venv/bin/python
FAST := not journey and not clients and not slow

.PHONY: venv lint fast journeys clients long test bench bench-quick

venv:
	python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,spark,browser]'

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check . && $(PY) -m mypy

fast:
	$(PY) -m pytest -m "$(FAST)"

journeys:
	$(PY) -m pytest tests/journeys

clients:
	$(PY) -m pytest -m clients tests/clients

long:
	$(PY) -m pytest --long

test:
	$(PY) -m pytest

bench:
	$(PY) bench/run_all.py

bench-quick:
	$(PY) bench/run_all.py --quick
