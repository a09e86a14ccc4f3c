# The README's two commands: `make demo` and `make test`. Both work from a fresh clone with only
# Python 3.10+ and make: the first run creates .venv and installs what it needs.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp
PYTEST_WORKERS ?= 4

.PHONY: demo test lint typecheck unit bench bench-servers bench-smoke soak clean servers chaos

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

# Regenerates BENCHMARKS.md: every store, tenure next to its floors and peers (20-25 minutes).
bench: $(STAMP) $(NODE_STAMP) servers
	$(BIN)/python bench/run.py --output BENCHMARKS.md

# The server stores only (Redis, PostgreSQL, MySQL), printed; BENCHMARKS.md is left alone.
bench-servers: $(STAMP) servers
	$(BIN)/python bench/run.py --stores redis,postgres,mysql

# Every benchmark once, briefly (about 5 minutes): fails when anything could not be measured
# or one of the peer libraries (filelock, portalocker, redis-py Lock, python-redis-lock, pottery,
# tooz, the bare Azure SDK) is missing.
bench-smoke: $(STAMP) $(NODE_STAMP) servers
	$(BIN)/python bench/run.py --quick --check > /dev/null

# The test suite's fenced chaos runs (SQLite, files, Redis, PostgreSQL, MariaDB, Azurite, each
# with its own server and the restart fault), longer: CHAOS_SECONDS per store (default 300),
# CHAOS_WORKERS workers (default 8), CHAOS_SEED (default: the tests' seed). About 15 minutes with
# the defaults; each run's summary table is printed at the end. See docs/chaos.md.
CHAOS_DIR ?= $(or $(TMPDIR),/tmp)/tenure-chaos
chaos: $(STAMP) $(NODE_STAMP) servers
	env TENURE_CHAOS_SECONDS=$${CHAOS_SECONDS:-300} TENURE_CHAOS_WORKERS=$${CHAOS_WORKERS:-8} \
		$${CHAOS_SEED:+TENURE_CHAOS_SEED=$$CHAOS_SEED} TENURE_REQUIRE_SERVICES=1 \
		$(BIN)/pytest -n 2 -p no:randomly -q tests/chaos/test_chaos.py tests/chaos/test_chaos_jobs.py \
		tests/chaos/test_chaos_queue.py tests/chaos/test_chaos_lock_all.py \
		tests/chaos/test_chaos_groups.py -k "fenced_run or jobs_on or queue_with or queue_on" \
		--basetemp=$(CHAOS_DIR); status=$$?; \
		find $(CHAOS_DIR) -name summary.txt -exec cat {} +; exit $$status

# Repeats the conformance suite; RUNS=5 by default.
soak: $(STAMP) $(NODE_STAMP) servers
	for i in $$(seq $${RUNS:-5}); do $(BIN)/pytest -n $(PYTEST_WORKERS) -q tests/conformance || exit 1; done

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache .hypothesis
