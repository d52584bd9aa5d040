# Two entry points, each bootstrapping everything from this repository's files:
#   make demo   save a packet and resume it on the embedded local store
#   make test   lint and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

NODE_STAMP := tests/dynalite/node_modules/.installed-stamp
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test lint typecheck format bench clean sysdeps nodedeps

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The demo runs on a throwaway config and data dir, removed at the end: it never
# touches your own store, and never sends the sample to a server you are signed in to
# (nor to one LTM_HOST and LTM_TOKEN name in your environment).
demo: $(STAMP)
	@demo=$$(mktemp -d "$${TMPDIR:-/tmp}/ltm-demo.XXXXXX") && trap 'rm -rf "$$demo"' EXIT && \
	  unset LTM_HOST LTM_TOKEN && \
	  export LTM_CONFIG_DIR="$$demo/config" LTM_DATA_DIR="$$demo/data" LTM_STATE_DIR="$$demo/state" && \
	  echo "== in a throwaway store ($$demo, removed at the end; your own ltm data is untouched)" && \
	  echo "== ltm example | ltm save -   (the sample packet, saved to that local store)" && \
	  id=$$($(BIN)/ltm example | $(BIN)/ltm save -) && \
	  echo "== ltm ls" && $(BIN)/ltm ls --limit 5 && \
	  echo "== ltm resume $$id" && $(BIN)/ltm resume "$$id"

lint: $(STAMP) typecheck
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy checks the package as pip installs it (chalicelib/ as ltm, cli/ as ltm.cli): from a
# tree of symlinks so named, made afresh each run ([tool.mypy] in pyproject.toml).
TYPECHECK := build/typecheck/ltm
typecheck: $(STAMP)
	rm -rf build/typecheck && mkdir -p $(TYPECHECK)
	ln -s $(CURDIR)/chalicelib/* $(TYPECHECK)/
	ln -s $(CURDIR)/cli $(TYPECHECK)/cli
	$(BIN)/mypy

# Every wall-clock budget in the tests grows by this factor (tests/timing.py): 3 leaves
# room for a machine as loaded as a shared CI runner. LTM_TEST_TIME_SCALE=1 make test for none.
LTM_TEST_TIME_SCALE ?= 3

# compileall first: the thousands of ltm processes the tests start then load bytecode, as
# an installed ltm does (pip compiles it), where the machine sets PYTHONDONTWRITEBYTECODE.
test: sysdeps nodedeps lint
	$(BIN)/python -m compileall -q chalicelib cli app.py
	LTM_TEST_TIME_SCALE=$(LTM_TEST_TIME_SCALE) $(BIN)/pytest -n 2 -q

# dynalite, the store contract suite's second DynamoDB engine (tests/dynalite_engine.py),
# from tests/dynalite/package-lock.json. Without Node.js its tests are skipped, and say so.
nodedeps:
	@if command -v node >/dev/null 2>&1; then $(MAKE) --no-print-directory $(NODE_STAMP); \
	else echo "node: not found; the dynalite store tests will be skipped"; fi

$(NODE_STAMP): tests/dynalite/package-lock.json
	npm ci --prefix tests/dynalite --no-audit --no-fund --loglevel=error
	touch $@

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done

# System packages the browser tests need (Debian's chromium, driven by Playwright;
# never `playwright install`). Installs only when $(CHROMIUM) is missing, with
# apt-get as root or through sudo. Where that cannot be done (no apt-get, no root or
# sudo, or the install fails), it says so and goes on: the browser tests are then
# skipped, each saying why, and every other test runs.
sysdeps:
	@if [ -x $(CHROMIUM) ]; then echo "chromium: $$($(CHROMIUM) --version 2>/dev/null)"; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	  echo "chromium: missing, and no apt-get to install it; the browser tests will be skipped"; \
	else \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo; \
	  else echo "chromium: missing, and installing it needs root or sudo; the browser tests will be skipped"; exit 0; fi; \
	  { $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; } \
	    || echo "chromium: apt-get could not install it; the browser tests will be skipped"; \
	fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis tests/dynalite/node_modules
