#!/usr/bin/env bash
# GPU check for the training loops (issue #13) and the kernel environment (issues #5, #10): build and evaluate the CUDA fixtures and hacks,
# including the GPU-side families of issue #10 (side streams, CUDA-graph replay, event misuse, persisting-L2
# windows, the roofline floor with the device's measured bandwidth). One prepared run, under 8 minutes.
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

# 0) every training path on CUDA (issue #13): SFT, GRPO with each memory key and LoRA, Direct-OPD in every
#    reward mode, vanilla OPD, the sampler and SAR, on a SmolLM2-135M-shaped Llama (random weights); each
#    phase's wall time, tokens/s and peak CUDA memory go to $OUT/loops.jsonl
rm -f "$OUT/loops.jsonl"
GPU_CHECK_OUT="$OUT" $PY -m pytest -q -m gpu tests/scale/test_loops_on_device.py 2>&1 | tee "$OUT/pytest_loops.txt"
$PY -c "import json,sys; [print(json.dumps(json.loads(l))) for l in open(sys.argv[1])]" "$OUT/loops.jsonl" \
  | tee "$OUT/loops_summary.txt" || true

# 1) GPU tests: CUDA fixture correct + profiled (paired); noop / fallback / side-stream / graph-replay / L2 hacks
#    caught; the physical floor from the device bandwidth
$PY -m pytest -q -m gpu tests/kernels/test_gpu.py 2>&1 | tee "$OUT/pytest_gpu.txt"

# 1b) the device numbers the floor uses, and a timing-only probe per GPU family (static layer off, so the
#     runtime defenses alone are seen): side stream, graph replay, persisting L2 + events
$PY - <<'PYEOF' 2>&1 | tee "$OUT/gpu_families.txt"
import json
from shiftkit.kernels import EvalConfig, evaluate
from shiftkit.kernels.evaluate import memory_bandwidth
from shiftkit.kernels.fixtures import PROBLEMS, ROOT
print("device copy bandwidth GB/s", round(memory_bandwidth("cuda") / 1e9, 1))
P = PROBLEMS / "scale_shift_clamp.py"
for name in ("correct", "hack_stream", "hack_graph", "hack_l2"):
    r = evaluate(P, ROOT / "cuda" / f"scale_shift_clamp_{name}.py",
                 EvalConfig(backend="cuda", static_checks=False, baseline_compile=False, timed_calls=30))
    print(json.dumps({"fixture": name, "correct": r.correct, "reward": r.reward, "codes": r.codes(None),
                      "speedup_eager": r.speedup_eager, "paired": {k: v for k, v in r.paired.items() if k != "compile"},
                      "reason": r.reason[:160]}, default=str))
PYEOF

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
