#!/usr/bin/env bash
# GPU check for the kernel environment (issue #5): build and evaluate the CUDA fixtures and hacks.
# Needs an NVIDIA GPU, a CUDA build of torch and nvcc (CUDA_HOME). Usage:
#   scripts/gpu_check.sh            # writes results to ${OUT:-runs/gpu_check}
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-runs/gpu_check}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-.}
export SHIFTKIT_KERNEL_CACHE=${SHIFTKIT_KERNEL_CACHE:-.cache/kernels-gpu}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$($PY -c "import torch; m,n=torch.cuda.get_device_capability(); print(f'{m}.{n}')" 2>/dev/null || echo 9.0)}

$PY - <<'PYEOF' | tee "$OUT/env.txt"
import shutil, torch, torch.utils.cpp_extension as ce
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print("CUDA_HOME", ce.CUDA_HOME, "nvcc", shutil.which("nvcc"))
assert torch.cuda.is_available(), "no CUDA device"
PYEOF

# 1) GPU tests (CUDA fixture correct + profiled; noop / fallback / side-stream hacks caught)
$PY -m pytest -q -m gpu tests/kernels/test_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt"

# 2) one JSON result per CUDA fixture, via the CLI
P=shiftkit/kernels/fixtures/problems/scale_shift_clamp.py
for s in shiftkit/kernels/fixtures/cuda/*.py; do
  n=$(basename "$s" .py)
  $PY -m shiftkit kernels eval --backend cuda --problem "$P" --solution "$s" baseline_compile=true --json \
    > "$OUT/$n.json" 2> "$OUT/$n.err" || true
  $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], 'correct', d['correct'], 'reward', d['reward'], d['reason'][:100])" "$OUT/$n.json" "$n" || cat "$OUT/$n.err"
done | tee "$OUT/summary.txt"

# 3) the CPU suite's adversarial hacks still behave the same on this machine (CPU backend)
$PY -m pytest -q tests/adversarial 2>&1 | tail -3 | tee -a "$OUT/summary.txt"
