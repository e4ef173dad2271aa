"""What every benchmark script shares: its provenance block, the spread of repeated measurements, one
thread with ``OMP_WAIT_POLICY=PASSIVE``, and the machine's copy bandwidth (the floor of memory-bound work).

Every results file (``benchmarks/results/*.json``) carries ``command``, ``commit`` (the tree it ran on;
``-dirty`` when uncommitted changes were present), ``matched``, ``peer`` (name and version, or ``None``
with ``peer_note`` where there is no peer), ``ratio`` (peer median / shiftkit median) where there is a
peer, min/median/max of every timed quantity, and the load average around the run
(``tests/test_results_provenance.py`` checks the keys).
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def single_thread(threads: int = 1) -> None:
    """Re-execute this script with ``OMP_NUM_THREADS=threads`` and ``OMP_WAIT_POLICY=PASSIVE`` unless set
    (OpenMP reads them at start-up only), then set torch's thread count."""
    want = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    if any(os.environ.get(k) != v for k, v in want.items()):
        os.execvpe(sys.executable, [sys.executable, *sys.argv], {**os.environ, **want})
    import torch

    torch.set_num_threads(threads)


def commit() -> str:
    """The short commit of the tree the benchmark runs on, ``-dirty`` if tracked files differ from it."""
    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short=10", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "shiftkit", "benchmarks/*.py")
    return head + ("-dirty" if dirty else "")


def command() -> str:
    """The command line that reproduces the run (from the repository root)."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return " ".join(["python", script, *map(shlex.quote, sys.argv[1:])])


def provenance() -> dict:
    import torch

    out = {"command": command(), "commit": commit(), "torch": torch.__version__,
           "machine": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
           "threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    try:
        import transformers

        out["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover
        pass
    return out


def spread(xs: list[float]) -> dict:
    """``{min, median, max, n}`` of repeated measurements."""
    xs = [float(x) for x in xs]
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def copy_bandwidth(nbytes: int = 512 * 2**20, repeats: int = 5) -> float:
    """Best-of-``repeats`` copy bandwidth in bytes/s, counted STREAM's way (bytes read + bytes written),
    of one thread copying a filled ``nbytes`` buffer into another (both touched first, so no page faults
    are timed). A memory-bound kernel that reads ``N`` bytes cannot take less than ``N / bandwidth``."""
    import torch

    src = torch.ones(nbytes // 4)
    dst = torch.zeros_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def trl_phase_timer(rows: list[dict], make_row):
    """Time a TRL GRPO-style trainer's phases on the instance: ``(attach, callback)``.

    ``attach(trainer)`` wraps the instance's ``_generate`` (generation) and ``_generate_and_score_completions``
    (generation + scoring); ``callback`` (a ``TrainerCallback``) times each step and appends
    ``make_row(step_s, generation_s, generate_and_score_s, trainer)`` to ``rows``."""
    import transformers

    acc = {"gen": 0.0, "gen_score": 0.0}
    box: list = []

    def timed(fn, key):
        def wrapper(*a, **kw):
            s = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                acc[key] += time.perf_counter() - s
        return wrapper

    def attach(tr) -> None:
        box.append(tr)
        tr._generate = timed(tr._generate, "gen")
        tr._generate_and_score_completions = timed(tr._generate_and_score_completions, "gen_score")

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            acc["gen"] = acc["gen_score"] = 0.0
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            rows.append(make_row(time.perf_counter() - self.t0, acc["gen"], acc["gen_score"], box[0]))

    return attach, Timer()
