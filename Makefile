# Two entry points, each bootstrapping everything from this repository's files:
#   make demo   save a packet and resume it on the embedded local store
#   make test   lint and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint format bench clean sysdeps

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

test: sysdeps lint
	$(BIN)/pytest -n 2 -q

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
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
