# Spark developer tasks. Each target installs what it needs into .venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast lint typecheck pytest browser-deps bench-wrk demo bench constraints clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Install Debian packages $(1) when command $(2) is missing and we are root; otherwise say what $(3) does instead.
define apt_deps
	@if command -v $(2) >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq $(1) >/dev/null \
	  || { apt-get update -qq && apt-get install -y -qq $(1) >/dev/null; } \
	  || echo "could not install $(1): $(3)"; \
	else echo "$(1) is not installed and we are not root: $(3)"; fi
endef

# The browser test drives Debian's chromium; without it the test skips.
browser-deps:
	$(call apt_deps,chromium chromium-driver,chromedriver,the browser test will skip)

# `SPARK_BENCH_WRK=1 make bench-wrk` also measures intake under wrk (a C client that takes almost no CPU).
bench-wrk: $(STAMP)
	$(call apt_deps,wrk,wrk,the intake benchmark uses its Python load generator)
	SPARK_BENCH_WRK=1 $(BIN)/python -m bench webhooks

# One test process per core (at most 4; each starts its own private Redis). A module's tests stay in one
# process (--dist loadfile), so a stack a module shares starts once. The 15 slowest tests are listed after
# every run, so a slow one shows. PYTEST_XDIST="-n 0" runs everything in this one process.
PYTEST_XDIST ?= -n auto --maxprocesses 4
pytest: $(STAMP) browser-deps
	$(BIN)/pytest -q $(PYTEST_XDIST) --dist loadfile --durations=15 $(PYTEST_ARGS)

test: lint typecheck pytest

# The quick loop while changing code: the pure core and the in-process flows (no processes, no browser).
test-fast: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_XDIST) tests/core tests/flows $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/spark demo $(DEMO_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Pin the image's dependencies (constraints.txt) at the versions installed here, after changing pyproject.toml.
constraints: $(STAMP)
	$(BIN)/python deploy/constraints.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .spark
