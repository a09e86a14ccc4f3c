# The README's two commands: `make demo` and `make test`. Both work from a fresh clone with only
# Python 3.10+ and make: the first run creates .venv and installs what it needs.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp
PYTEST_WORKERS ?= 4

.PHONY: demo test lint typecheck unit bench bench-servers bench-smoke soak clean servers

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "tenure needs Python 3.10 or newer (found: $$($(PYTHON) --version))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { \
		echo "python -m venv failed; trying virtualenv"; \
		$(PYTHON) -m pip install --user -q virtualenv && $(PYTHON) -m virtualenv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@touch $(STAMP)

# Azurite (the Azure Storage emulator the azblob tests start), pinned in package.json and
# package-lock.json. Without node/npm: installed from Debian's packages when root, else a message
# (the azblob tests then skip, or fail under TENURE_REQUIRE_SERVICES=1).
$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "npm not found: installing nodejs and npm with apt-get"; \
			(apt-get install -y -q nodejs npm || \
			 (apt-get update -q && apt-get install -y -q nodejs npm)) >/dev/null; \
		fi; }
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); \
	else \
		echo "node and npm are missing: the azblob tests need Azurite (npm). Install Node.js"; \
		echo "and npm (e.g. apt-get install nodejs npm), then run make test again."; \
	fi

demo: $(STAMP)
	$(BIN)/tenure demo

lint: $(STAMP)
	$(BIN)/python scripts/unasync.py --check
	$(BIN)/ruff check src tests bench examples scripts

typecheck: $(STAMP)
	$(BIN)/mypy --strict src/tenure

# redis-server, PostgreSQL and MariaDB for the tests that start their own servers.
servers:
	@sh scripts/install_servers.sh

unit: $(STAMP) $(NODE_STAMP) servers
	$(BIN)/pytest -n $(PYTEST_WORKERS) tests

test: lint typecheck unit

bench: $(STAMP) $(NODE_STAMP) servers
	$(BIN)/python bench/run.py --output BENCHMARKS.md

# The server stores only (Redis, PostgreSQL, MySQL), printed; BENCHMARKS.md is left alone.
bench-servers: $(STAMP) servers
	$(BIN)/python bench/run.py --stores redis,postgres,mysql

# Every benchmark once, briefly (a minute or two): fails when anything could not be measured.
bench-smoke: $(STAMP) $(NODE_STAMP) servers
	$(BIN)/python bench/run.py --quick --check > /dev/null

# Repeats the conformance suite; RUNS=5 by default.
soak: $(STAMP) $(NODE_STAMP) servers
	for i in $$(seq $${RUNS:-5}); do $(BIN)/pytest -n $(PYTEST_WORKERS) -q tests/conformance || exit 1; done

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache .hypothesis
