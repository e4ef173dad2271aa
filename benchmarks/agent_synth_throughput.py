"""``agent synth`` throughput and its filters' reject reasons (issue 18, item 5).

    python benchmarks/agent_synth_throughput.py --n 120 --seed 1 --out benchmarks/results/agent_synth_throughput.json

Runs the real pipeline (``shiftkit.agent.synth.run_synth``: composition, then the filters leak,
stochastic, eager, degenerate, similarity, runtime, compile) into a scratch directory and records
admitted problems per minute of wall time, candidates per minute, the reject counts and one example
reason per filter, and the seconds each filter spent in total. There is no peer to compare with: CUDA
Agent's synthesis pipeline is not released; ``matched`` records the settings instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "inductor"))

from shiftkit.agent.synth import SynthConfig, run_synth  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--out", default="benchmarks/results/agent_synth_throughput.json")
    a = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="sk-synth-bench-") as d:
        cfg = SynthConfig(out=d, n=a.n, seed=a.seed, compile_backend=a.compile_backend, overwrite=True)
        t0 = time.perf_counter()
        summary = run_synth(cfg)
        wall = time.perf_counter() - t0
        rows = [json.loads(x) for x in (Path(d) / "dataset.jsonl").read_text().splitlines() if x.strip()]
        rej = [json.loads(x) for x in (Path(d) / "rejected.jsonl").read_text().splitlines() if x.strip()]
    filter_s: dict[str, float] = defaultdict(float)
    for r in rows:
        for k, v in (r.get("filter_stats") or {}).items():
            if k.startswith("t_") and k.endswith("_s"):
                filter_s[k[2:-2]] += v
    for r in rej:
        for k, v in (r.get("stats") or {}).items():
            if k.startswith("t_") and k.endswith("_s"):
                filter_s[k[2:-2]] += v
    example = {}
    for r in rej:
        example.setdefault(r["filter"], r["reason"][:160])
    res = {"what": "agent synth throughput: admitted problems per minute of wall time, and reject reasons",
           "command": "python " + " ".join(sys.argv), "commit": commit, "peer": None,
           "peer_note": "no peer: CUDA Agent's synthesis pipeline is not released",
           "matched": {"n": a.n, "seed": a.seed, "compile_backend": a.compile_backend, "threads": cfg.threads,
                       "runtime_window_ms": [cfg.min_ms, cfg.max_ms], "eval_set": cfg.eval_set or "kernel fixtures",
                       "note": "no peer: CUDA Agent's synthesis pipeline is not released"},
           "candidates": summary["candidates"], "admitted": summary["admitted"], "seconds": round(wall, 1),
           "admitted_per_minute": round(summary["admitted"] / (wall / 60), 2),
           "candidates_per_minute": round(summary["candidates"] / (wall / 60), 2),
           "rejected": summary["rejected"], "reject_example": example,
           "filter_seconds": {k: round(v, 1) for k, v in sorted(filter_s.items())},
           "per_depth": summary["per_depth"], "compile_checked": summary["compile_checked"],
           "machine": "shared 2-core CPU (other jobs running), 1 thread; inductor cache warm or cold as found"}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: res[k] for k in ("candidates", "admitted", "seconds", "admitted_per_minute", "rejected",
                                          "filter_seconds")}, indent=1))


if __name__ == "__main__":
    main()
