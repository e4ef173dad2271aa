"""Pure timing statistics and speedups (nanosecond lists in, floats out)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method)."""
    if not xs:
        raise ValueError("quantile of an empty list")
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(xs: Sequence[float]) -> float:
    return quantile(xs, 0.5)


def iqr(xs: Sequence[float]) -> float:
    return quantile(xs, 0.75) - quantile(xs, 0.25)


def cv(xs: Sequence[float]) -> float:
    """Coefficient of variation (population std / mean); 0 for a constant list."""
    if not xs:
        raise ValueError("cv of an empty list")
    m = sum(xs) / len(xs)
    if m == 0:
        return 0.0
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) / m


def summarize(times_ns: Sequence[float]) -> dict:
    """{median_ms, iqr_ms, min_ms, max_ms, n} from per-call nanoseconds."""
    ms = [t / 1e6 for t in times_ns]
    return {"median_ms": median(ms), "iqr_ms": iqr(ms), "min_ms": min(ms), "max_ms": max(ms), "n": len(ms)}


def speedup(baseline_ms: float | None, candidate_ms: float | None) -> float | None:
    if baseline_ms is None or candidate_ms is None or candidate_ms <= 0:
        return None
    return baseline_ms / candidate_ms
