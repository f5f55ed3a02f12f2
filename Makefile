# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned to the CPU build that lies on this machine's disk; left to
# itself pip would pick a CUDA build of several GB for sentence-transformers.
TORCH := torch==2.13.0

.PHONY: run test install install-test chromium lint bench screens clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test]'
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
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

lint: install-test
	$(BIN)/ruff check app tests bench tools
	$(BIN)/lint-imports

bench: install-test
	$(BIN)/python bench/prompt_build.py
	$(BIN)/python bench/cache_prefix.py
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/recall_quality.py
	$(BIN)/python bench/lore_scan.py
	$(BIN)/python bench/summaries.py
	$(BIN)/python bench/advanced_memory.py
	$(BIN)/python bench/memory_use.py

# Retake the README's screenshots (docs/screens/) after changing a page the tour shows.
screens: install-test chromium
	$(BIN)/python tools/readme_screens.py

clean:
	rm -rf $(VENV) .pytest_cache
