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


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2**n


def median_ci(xs: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval for the median from order statistics: (lo, median, hi).
    The interval [x_(k), x_(n-k+1)] covers the median with probability 1 - 2 P(X < k), X ~ Bin(n, 1/2);
    k is the largest rank that keeps the coverage >= ``level``; with fewer than 6 values it is the whole
    range."""
    if not xs:
        raise ValueError("median_ci of an empty list")
    s = sorted(xs)
    n = len(s)
    alpha = 1.0 - level
    k = 1  # 1-based rank of the lower bound; coverage of [x_(k), x_(n-k+1)] is 1 - 2 P(X <= k-1)
    while k + 1 <= n // 2 and 2 * _binom_cdf(k, n) <= alpha:
        k += 1
    lo_idx = k - 1
    return s[lo_idx], median(s), s[n - 1 - lo_idx]


def log_ratios(base_ns: Sequence[float], cand_ns: Sequence[float]) -> list[float]:
    """Paired per-round log(baseline / candidate); rounds with a non-positive time are dropped."""
    return [math.log(b / c) for b, c in zip(base_ns, cand_ns) if b > 0 and c > 0]


def decide(ci: tuple[float, float, float], threshold: float) -> str:
    """Is the speedup (CI in log space) above or below ``threshold`` (a speedup), or undecided?"""
    lo, _, hi = ci
    t = math.log(threshold)
    if lo > t:
        return "above"
    if hi < t:
        return "below"
    return "undecided"


# ----------------------------------------------------------------------------- block-level statistics
# One evaluation times the candidate against its baselines in several independent blocks, each with fresh
# worker processes. A process-level effect (memory layout, the compiled baseline's code, core placement)
# is shared by every round of a block, so the rounds of one block are not independent draws: the unit of
# replication is the block, and the interval is built over the block-level log ratios.


def student_t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom (Simpson's rule on the density)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if x == 0:
        return 0.5
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    a = abs(x)
    # substitute x = tan(u): the integrand c * cos(u)^(df-1) ... is smooth on [0, atan(a)] for any df
    u1 = math.atan(a)
    n = 2000
    h = u1 / n

    def f(u: float) -> float:
        t = math.tan(u)
        return c * (1 + t * t / df) ** (-(df + 1) / 2) / math.cos(u) ** 2

    s = f(0) + f(u1) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, n))
    p = 0.5 + s * h / 3
    return p if x > 0 else 1.0 - p


def student_t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of Student's t (bisection on :func:`student_t_cdf`)."""
    if not 0 < q < 1:
        raise ValueError("q must be in (0, 1)")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -student_t_quantile(1 - q, df)
    lo, hi = 0.0, 1.0
    while student_t_cdf(hi, df) < q:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


def block_values(blocks: Sequence[Sequence[tuple[float, float]]]) -> list[float]:
    """One value per block: the log of its mean-cost ratio, log(sum of baseline times / sum of candidate
    times) over its paired rounds (rounds with a non-positive time and empty blocks dropped). The mean cost,
    not the median round: work concentrated in a few calls costs what it costs (redteam3 h13)."""
    out = []
    for b in blocks:
        pairs = [(x, y) for x, y in b if x > 0 and y > 0]
        if pairs:
            out.append(math.log(sum(x for x, _ in pairs) / sum(y for _, y in pairs)))
    return out


def blocks_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Confidence interval for the mean of independent block values (log ratios): (lo, mean, hi), the
    Student-t interval with len - 1 degrees of freedom. Between-block (between-process) variance is in it.
    One block: no spread can be estimated, the interval is unbounded (never decides)."""
    if not values:
        raise ValueError("blocks_ci of an empty list")
    n = len(values)
    m = sum(values) / n
    if n == 1:
        return -math.inf, m, math.inf
    sd = math.sqrt(sum((x - m) ** 2 for x in values) / (n - 1))
    hw = student_t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return m - hw, m, m + hw
