"""The real environment's reward over random compositions of the kernel grammar (is there signal?).

    python benchmarks/agent_kernel_grammar_rewards.py --n 36 --seed 0 --out benchmarks/results/agent_kernel_grammar_rewards.json

Draws ``n`` compositions uniformly from the grammar (shiftkit/agent/kernel_grammar.py), each on a
problem drawn from the split, renders the solution and evaluates it in ``profile`` mode on the
in-process environment with the task's timing config (TASK_CONFIG). Writes the fractions of -1/+1/+2/+3
overall, per split and per slot value, every sample's result, the command and the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiftkit.agent import kernel_grammar as G  # noqa: E402
from shiftkit.kernels.envclient import LocalKernelEnv  # noqa: E402

TASK_CONFIG = G.TASK_EVAL_CONFIG  # the task's timing protocol (shiftkit/agent/kernel_grammar.py)


def fractions(rs: list[float]) -> dict:
    c = Counter(rs)
    n = max(1, len(rs))
    return {"n": len(rs), "-1": c[-1.0] / n, "+1": c[1.0] / n, "+2": c[2.0] / n, "+3": c[3.0] / n,
            "mean": sum(rs) / n if rs else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=36)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", default="train,heldout")
    ap.add_argument("--out", default="benchmarks/results/agent_kernel_grammar_rewards.json")
    a = ap.parse_args()
    rng = random.Random(f"grammar-rewards:{a.seed}")
    names = [n for s in a.splits.split(",") for n in G.SPLITS[s]]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    env = LocalKernelEnv()
    samples = []
    t0 = time.time()
    for i in range(a.n):
        p = G.PROBLEMS[rng.choice(names)]
        c = G.random_composition(rng)
        t = time.time()
        d = env.evaluate(p.source(), G.render_solution(p, c), "profile", TASK_CONFIG, p.name)
        s = {"problem": p.name, "split": "train" if p.name in G.SPLITS["train"] else "heldout",
             "composition": G.format_composition(c), "reward": d.get("reward", -1.0) if "error" not in d else None,
             "reason": d.get("reason") or d.get("error"), "speedup_eager": d.get("speedup_eager"),
             "speedup_compile": d.get("speedup_compile"), "inconclusive": d.get("inconclusive"),
             "codes": [f["code"] for f in d.get("findings", []) if f.get("severity") == "error"],
             "seconds": round(time.time() - t, 1)}
        samples.append(s)
        print(f"[{i + 1}/{a.n}] {p.name:28s} {s['composition']:55s} {s['reward']} ({s['seconds']} s) {str(s['reason'])[:70]}",
              flush=True)
    ok = [s for s in samples if s["reward"] is not None]
    by_slot = {}
    for k in G.SLOTS:
        by_slot[k] = {v: fractions([s["reward"] for s in ok if f"{k}={v}" in s["composition"].split()])
                      for v in G.SLOTS[k]}
    res = {"what": "real environment reward over uniformly random grammar compositions (profile mode)",
           "command": "python " + " ".join(sys.argv), "commit": commit, "seed": a.seed, "n": a.n,
           "peer": None, "peer_note": "a measurement of the environment's reward distribution, not a comparison",
           "matched": {"what": "every composition evaluated by the same environment and task_config",
                       "threads_per_evaluation": 1},
           "task_config": TASK_CONFIG, "overall": fractions([s["reward"] for s in ok]),
           "per_split": {sp: fractions([s["reward"] for s in ok if s["split"] == sp]) for sp in ("train", "heldout")},
           "per_slot": by_slot, "unscorable": len(samples) - len(ok), "seconds": round(time.time() - t0, 1),
           "machine": "shared 2-core CPU (other jobs running), 1 thread per evaluation", "samples": samples}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: res[k] for k in ("overall", "per_split", "seconds")}, indent=1))


if __name__ == "__main__":
    main()
