#!/usr/bin/env bash
# GPU check for the training loops (issues #13, #19: FSDP2 on the visible GPUs, bf16) and the kernel environment (issues #5, #10): build and evaluate the CUDA fixtures and hacks,
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

# 0b) many processes and bf16 (issue #19): GRPO with a KL reference on a random Qwen3 (hidden 256, 4 layers),
#     one process under configs/accelerate/single_gpu.yaml (mixed_precision bf16 -> autocast=bfloat16) and, with
#     two or more GPUs, 2 FSDP2 ranks under configs/accelerate/fsdp.yaml (policy and reference sharded, NCCL);
#     prints dist/strategy, autocast and the 2-rank vs 1-process weight difference relative to the update
#     (bf16 autocast: not bit-equal across world sizes; a broken reduction is of the update's own size)
NGPU=$($PY -c "import torch; print(torch.cuda.device_count())")
$PY - "$OUT/scale" <<'PYEOF'
import sys
from pathlib import Path
from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model, save_model
d = Path(sys.argv[1]); d.mkdir(parents=True, exist_ok=True)
tok = make_char_tokenizer()
save_model(make_tiny_model(TinyModelSpec(hidden_size=256, num_hidden_layers=4, intermediate_size=768, head_dim=64),
                           vocab_size=len(tok), seed=0), tok, d / "student")
(d / "reward.py").write_text("def parity(completions, **kw):\n    return [float(len(c) % 2) for c in completions]\n")
PYEOF
RL=(rl --model "$OUT/scale/student" tasks=add:1 "reward=$OUT/scale/reward.py:parity" steps=3 prompts_per_step=8
    group_size=4 max_new_tokens=16 lr=1e-3 kl_coef=0.1 token_budget=256 eval_every=0 save_every=2 samples_every=0
    threads=1 progress=false overwrite=true)
timeout 180 $PY -m accelerate.commands.launch --config_file configs/accelerate/single_gpu.yaml -m shiftkit "${RL[@]}" \
  "out=$OUT/scale/one" 2>&1 | tail -3 | tee "$OUT/scale_bf16.txt"
if [ "$NGPU" -ge 2 ]; then
  timeout 240 $PY -m accelerate.commands.launch --config_file configs/accelerate/fsdp.yaml --num_processes 2 \
    -m shiftkit "${RL[@]}" "out=$OUT/scale/two" 2>&1 | tail -3 | tee "$OUT/scale_fsdp.txt"
else
  echo "one GPU visible: the 2-rank FSDP run is skipped" | tee "$OUT/scale_fsdp.txt"
fi
$PY - "$OUT/scale" <<'PYEOF' 2>&1 | tee -a "$OUT/scale_fsdp.txt"
import json, sys
from pathlib import Path
from safetensors.torch import load_file
d = Path(sys.argv[1])
for r in ("one", "two"):
    if (d / r / "summary.json").exists():
        s, c = json.loads((d / r / "summary.json").read_text()), json.loads((d / r / "config.json").read_text())
        print(r, {k: v for k, v in s.items() if k.startswith("dist/")}, "autocast", c["autocast"])
if (d / "two" / "final").exists():
    w0, w1, w2 = (load_file(str(p / "model.safetensors")) for p in (d / "student", d / "one" / "final", d / "two" / "final"))
    num = sum(float(((w1[k] - w2[k]) ** 2).sum()) for k in w1) ** 0.5
    den = sum(float(((w1[k] - w0[k]) ** 2).sum()) for k in w1) ** 0.5
    print("fsdp 2 ranks vs 1 process: |w2 - w1| / |w1 - w0| =", num / den)
PYEOF

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
