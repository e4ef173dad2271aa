"""Set metrics over evaluation results (pure functions of plain dicts/lists)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from shiftkit.kernels.reward import faster


def fast_p(correct: Sequence[bool], speedups: Sequence[float | None], p: float) -> float:
    """KernelBench fast_p: fraction of problems that are correct and have speedup > p (fast_0 = pass rate)."""
    n = len(correct)
    if n == 0:
        return 0.0
    return sum(1 for c, s in zip(correct, speedups) if c and s is not None and s > p) / n


def geomean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def set_metrics(results: Sequence[dict], margin: float = 0.05, ps: Sequence[float] = (0.0, 1.0, 1.5, 2.0)) -> dict:
    """Pass rate, faster-than-eager/compile rates (with the reward margin), geomean speedups over correct
    solutions, fast_p for eager speedups, mean reward."""
    n = len(results)
    correct = [bool(r.get("correct")) for r in results]
    se = [r.get("speedup_eager") for r in results]
    sc = [r.get("speedup_compile") for r in results]
    out = {
        "n": n,
        "pass_rate": sum(correct) / n if n else 0.0,
        "faster_than_eager_rate": sum(1 for c, s in zip(correct, se) if c and faster(s, margin)) / n if n else 0.0,
        "faster_than_compile_rate": sum(1 for c, s in zip(correct, sc) if c and faster(s, margin)) / n if n else 0.0,
        "geomean_speedup_eager": geomean([s for c, s in zip(correct, se) if c and s]),
        "geomean_speedup_compile": geomean([s for c, s in zip(correct, sc) if c and s]),
        "mean_reward": sum(float(r.get("reward", 0.0)) for r in results) / n if n else 0.0,
    }
    for p in ps:
        out[f"fast_{p:g}"] = fast_p(correct, se, p)
    return out
