# The README's two commands: `make demo` and `make test`. Both work from a fresh clone with only
# Python 3.10+ and make: the first run creates .venv and installs what it needs.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 4

.PHONY: demo test lint typecheck unit bench soak clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "tenure needs Python 3.10 or newer (found: $$($(PYTHON) --version))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
		echo "python -m venv failed; trying virtualenv"; \
		$(PYTHON) -m pip install --user -q virtualenv && $(PYTHON) -m virtualenv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python demo/take_turns.py

lint: $(STAMP)
	$(BIN)/python scripts/unasync.py --check
	$(BIN)/ruff check src tests bench demo scripts

typecheck: $(STAMP)
	$(BIN)/mypy --strict src/tenure

unit: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) tests

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/run.py --output BENCHMARKS.md

# Repeats the conformance suite; RUNS=5 by default.
soak: $(STAMP)
	for i in $$(seq $${RUNS:-5}); do $(BIN)/pytest -n $(PYTEST_WORKERS) -q tests/conformance || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
