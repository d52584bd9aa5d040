# Two entry points, each bootstrapping everything from this repository's files:
#   make demo   save a packet and resume it on the embedded local store
#   make test   lint and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

NODE_STAMP := tests/dynalite/node_modules/.installed-stamp

.PHONY: demo test lint format bench clean sysdeps nodedeps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: $(STAMP)
	@echo "== ltm example | ltm save -   (the sample packet, saved to the local store)"
	@id=$$($(BIN)/ltm example | $(BIN)/ltm save -) && \
	  echo "== ltm ls" && $(BIN)/ltm ls --limit 5 && \
	  echo "== ltm resume $$id" && $(BIN)/ltm resume "$$id"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: sysdeps nodedeps lint
	$(BIN)/pytest -n 2 -q

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
# never `playwright install`). Installs only when /usr/bin/chromium is missing.
sysdeps:
	@if [ -x /usr/bin/chromium ]; then echo "chromium: $$(/usr/bin/chromium --version 2>/dev/null)"; \
	else SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; fi

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis tests/dynalite/node_modules
