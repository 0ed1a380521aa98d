# CIFAR Lab. The README's two commands:
#   make run    install everything into .venv and start the app (streamlit run server.py)
#   make test   install everything (test tools and the optional Ray extra too) and run the
#               whole test suite (the Ray executor's tests included: marker `ray`)
#   make test-fast  everything but the real-browser tests;  make test-unit  the unit tier
#   make lint   ruff's rules and the import contracts (pyproject.toml); make test runs ruff first
#   make run-ray  as `make run`, with training on Ray (a Ray started on this machine)
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
# The offline copy of CIFAR-10 beside the checkout, when it is there; else torchvision's download.
ARCHIVE := $(abspath ../shared/data/cifar10-jpeg.tar.gz)
ifneq ($(wildcard $(ARCHIVE)),)
export CIFARLAB_DATA ?= $(ARCHIVE)
endif
PORT ?= 8501

.PHONY: run run-ray lint test test-fast test-unit browser-deps bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Byte-compiled files are written as modules are first imported, by whichever process imports
# them first, and kept: this machine sets PYTHONDONTWRITEBYTECODE, and without .pyc files every
# process (xdist workers, app servers, training workers, Ray's) would compile torch again
# (docs/benchmarks.md §23). Compiling only what is imported costs a fraction of compiling all
# of site-packages at install (§26), so the installer does not compile either.
unexport PYTHONDONTWRITEBYTECODE
# uv, from pip's sources: the same pins in under half pip's time (scripts/install.py, §28).
INSTALL := $(BIN)/python scripts/install.py

$(VENV)/.app-installed: requirements.txt | $(BIN)/python
	$(INSTALL) -r requirements.txt
	touch $@

# Tests cover the Ray executor too, so the dev install includes the optional Ray extra.
$(VENV)/.dev-installed: requirements.txt requirements-dev.txt requirements-ray.txt | $(BIN)/python
	$(INSTALL) -r requirements-dev.txt -r requirements-ray.txt
	touch $@ $(VENV)/.app-installed $(VENV)/.ray-installed

$(VENV)/.ray-installed: requirements.txt requirements-ray.txt | $(BIN)/python
	$(INSTALL) -r requirements-ray.txt
	touch $@ $(VENV)/.app-installed

run: $(VENV)/.app-installed
	$(BIN)/python -m streamlit run server.py --server.port $(PORT)

# The hosting setting executor=ray (docs/hosting.md); CIFARLAB_RAY_ADDRESS joins a cluster.
run-ray: $(VENV)/.ray-installed
	CIFARLAB_EXECUTOR=ray $(BIN)/python -m streamlit run server.py --server.port $(PORT)

browser-deps:
	@bash scripts/ensure-chromium.sh

# pytest-xdist's workers for `make test` and `make test-fast`: the browser tests in one group
# (one app server and one Chromium), the Ray tests (one cluster) in one, every other module in
# one (tests/conftest.py's xdist groups; docs/testing.md). No reordering by test count: the
# browser group, the longest, comes early (test_browser*) and so starts at once, not last.
# `make test XDIST=` runs in one process.
XDIST ?= -n 2 --dist loadgroup --no-loadscope-reorder

# Lint only, never `ruff format`: the rules and why are in pyproject.toml. lint-imports also runs
# inside the suite (tests/test_layers.py).
lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: $(VENV)/.dev-installed browser-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(XDIST) --durations=25

# Everything but the real-browser tests.
test-fast: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest $(XDIST) -m "not browser"

# The unit tier, for the edit-test loop: no browser, no process started, no real data set.
test-unit: $(VENV)/.dev-installed
	$(BIN)/python -m pytest $(XDIST) -m "not browser and not integration and not slow" -q

bench: $(VENV)/.app-installed
	$(BIN)/python bench/bench_tutorial.py

clean:
	rm -rf $(VENV) .pytest_cache test-artifacts
