"""Measure the run-to-run spread of the suite's "it learns" tests (seeds x torch thread counts).

Training trajectories are deterministic per machine but not across CPUs; changing the thread count
changes reduction orders, which is the closest stand-in for "another machine" that one box has.
Each learning test's margin is chosen from these numbers (see the test docstrings).

    python scripts/learning_test_spread.py all       # or: opd | grpo | sft | agent_sft
    -> benchmarks/results/learning_test_spread.json (merged per test)

It calls the tests' own pipeline functions, so what is measured is exactly what is asserted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "learning_test_spread.json"
SEEDS = (0, 1, 2)
THREADS = (1, 2)


def _load(rel: str):
    spec = importlib.util.spec_from_file_location(rel.replace("/", "_"), ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _contrast(r: dict) -> dict:
    r["effect/forward_gain"] = r["pref/fwd"] - r["pref/ref"]
    r["effect/reverse_drop"] = r["pref/ref"] - r["pref/rev"]
    r["effect/contrast"] = r["pref/fwd"] - r["pref/rev"]
    r["effect/acc_forward_gain"] = r["acc/fwd"] - r["acc/ref"]
    r["effect/lp_correct_contrast"] = r["lp_correct/fwd"] - r["lp_correct/rev"]
    r["effect/lp_correct_gain"] = r["lp_correct/fwd"] - r["lp_correct/ref"]
    r["effect/lp_correct_drop"] = r["lp_correct/ref"] - r["lp_correct/rev"]
    return r


def _grpo(seed: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        return _contrast(_load("tests/learning.py").grpo_pipeline(Path(d), seed=seed, threads=threads))


def _opd(seed: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        r = _load("tests/learning.py").opd_pipeline(Path(d), seed=seed, threads=threads)
    return _contrast(r)


def _sft(seed: int, threads: int) -> dict:
    from shiftkit.sft import SFTConfig, run_sft

    with tempfile.TemporaryDirectory() as d:
        run_sft(SFTConfig(init="weak", out=f"{d}/r", tasks=["add:1"], steps=30, lr=1e-2, warmup=5,
                          progress=False, threads=threads, seed=seed))
        rows = [json.loads(l) for l in Path(f"{d}/r/metrics.jsonl").read_text().splitlines()]
    return {"effect/loss_ratio_last_first": rows[-1]["loss"] / rows[0]["loss"]}


def _agent_sft(seed: int, threads: int) -> dict:
    import torch

    mod = _load("tests/agent/test_masking.py")
    torch.set_num_threads(threads)
    model = mod.make_tiny_model(mod.SPEC, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rows = mod.demo_rows(mod.TOK, random.Random(1 + seed), 8, p_correct=1.0)
    losses = [mod.masked_sft_step(model, opt, rows, mod.TOK.pad_token_id) for _ in range(15)]
    return {"effect/loss_drop": losses[0] - losses[-1]}


TESTS = {
    "opd": ("tests/opd/test_it_learns.py::test_direct_opd_moves_the_student_along_the_pair_shift", _opd),
    "grpo": ("tests/core/test_grpo_learns.py::test_grpo_follows_the_direction_of_its_reward", _grpo),
    "sft": ("tests/core/test_training.py::test_sft_lowers_loss_and_writes_run_dir", _sft),
    "agent_sft": ("tests/agent/test_masking.py::test_masked_sft_step_trains", _agent_sft),
}


def _summary(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k in r if k.startswith("effect/")})
    out = {}
    for k in keys:
        v = [r[k] for r in runs]
        out[k] = {"min": min(v), "median": statistics.median(v), "max": max(v),
                  "std": statistics.stdev(v) if len(v) > 1 else 0.0}
    return out


def main(argv: list[str]) -> int:
    which = argv[1] if len(argv) > 1 else "all"
    names = list(TESTS) if which == "all" else [which]
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    for name in names:
        test_id, fn = TESTS[name]
        runs = []
        for threads in THREADS:
            for seed in SEEDS:
                t0 = time.time()
                r = fn(seed, threads)
                r.update(seed=seed, threads=threads, seconds=round(time.time() - t0, 1))
                print(name, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
                runs.append(r)
        data[name] = {"test": test_id, "seeds": list(SEEDS), "threads": list(THREADS), "runs": runs,
                      "summary": _summary(runs), "machine": f"{os.cpu_count()} cores",
                      "measured": time.strftime("%Y-%m-%d")}
        OUT.parent.mkdir(parents=True, exist_ok=True)
        tmp = OUT.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
