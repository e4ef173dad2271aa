"""Evaluation metrics as pure functions: avg@k, unbiased pass@k, response length and truncation rate.

With ``n`` samples per problem of which ``c`` are correct:

* **avg@k** (the papers' "ave@32"): the mean over problems of ``c / n`` with ``n = k`` samples,
  i.e. the expected accuracy of one sample at the sampling temperature;
* **pass@k**: the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)`` per
  problem, averaged over problems;
* **truncation rate**: the share of responses that hit ``max_new_tokens`` without an EOS.

Standard errors are across problems (``std(ddof=1) / sqrt(P)``). A sample counts as correct when
its reward is above ``threshold`` (default 0, the convention of :mod:`shiftkit.evaluate`); a NaN
reward (no reward applied) counts as not correct.
"""

from __future__ import annotations

import math
from typing import Sequence


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (0 for one value, NaN for none)."""
    x = [float(v) for v in values]
    if not x:
        return float("nan"), float("nan")
    m = sum(x) / len(x)
    if len(x) == 1:
        return m, 0.0
    var = sum((v - m) ** 2 for v in x) / (len(x) - 1)
    return m, math.sqrt(var / len(x))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem (numerically stable product form)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k > n or k < 1:
        raise ValueError(f"pass@{k} needs 1 <= k <= n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_at_k_reference(n: int, c: int, k: int) -> float:
    """The same quantity from exact binomials (for tests)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def correct_counts(scores_PK: Sequence[Sequence[float]], threshold: float = 0.0) -> list[tuple[int, int]]:
    """``(n, c)`` per problem from per-sample rewards (NaN is not correct)."""
    out = []
    for i, row in enumerate(scores_PK):
        if len(row) == 0:
            raise ValueError(f"problem {i} has no samples")
        out.append((len(row), sum(1 for s in row if not math.isnan(float(s)) and float(s) > threshold)))
    return out


def avg_at_k(scores_PK: Sequence[Sequence[float]], threshold: float = 0.0) -> tuple[float, float]:
    """avg@k and its standard error: the mean over problems of the share of correct samples."""
    return mean_se([c / n for n, c in correct_counts(scores_PK, threshold)])


def pass_at_ks(scores_PK: Sequence[Sequence[float]], ks: Sequence[int], threshold: float = 0.0) -> dict[str, float]:
    """``pass@k`` and ``pass@k_se`` for each k (every problem needs at least k samples)."""
    counts = correct_counts(scores_PK, threshold)
    out: dict[str, float] = {}
    for k in ks:
        out[f"pass@{k}"], out[f"pass@{k}_se"] = mean_se([pass_at_k(n, c, k) for n, c in counts])
    return out


def truncation_rate(stopped_at_eos: Sequence[bool]) -> float:
    """Share of responses that did not stop at EOS (they ran into ``max_new_tokens``)."""
    if not stopped_at_eos:
        return float("nan")
    return sum(1 for s in stopped_at_eos if not s) / len(stopped_at_eos)


def length_stats(lengths: Sequence[int]) -> dict[str, float]:
    """Mean, median and max response length in tokens."""
    if not lengths:
        return {"mean": float("nan"), "median": float("nan"), "max": float("nan")}
    s = sorted(lengths)
    n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"mean": sum(s) / n, "median": float(med), "max": float(s[-1])}


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to ``n``, and ``n`` itself (so pass@1 ... pass@K are all reported)."""
    return sorted({k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n} | {n})


def sample_summary(scores_PK: Sequence[Sequence[float]], lengths_PK: Sequence[Sequence[int]],
                   eos_PK: Sequence[Sequence[bool]], ks: Sequence[int] | None = None,
                   threshold: float = 0.0) -> dict[str, float]:
    """The sampled part of an eval summary: ``avg@K``, ``pass@k``, length and truncation.

    ``K`` is the number of samples per problem (all problems must have the same number).
    """
    ns = {len(r) for r in scores_PK}
    if len(ns) != 1:
        raise ValueError(f"every problem needs the same number of samples, got {sorted(ns)}")
    K = ns.pop()
    out: dict[str, float] = {}
    out[f"avg@{K}"], out[f"avg@{K}_se"] = avg_at_k(scores_PK, threshold)
    out.update(pass_at_ks(scores_PK, ks or default_ks(K), threshold))
    flat_len = [int(x) for row in lengths_PK for x in row]
    flat_eos = [bool(x) for row in eos_PK for x in row]
    for k, v in length_stats(flat_len).items():
        out[f"response_length/{k}"] = v
    out["truncation_rate"] = truncation_rate(flat_eos)
    out["n_samples"] = K
    return out


def greedy_summary(scores_P: Sequence[float], lengths_P: Sequence[int], eos_P: Sequence[bool],
                   threshold: float = 0.0) -> dict[str, float]:
    """``greedy_acc`` (and its se), greedy response length and truncation rate."""
    correct = [1.0 if not math.isnan(float(s)) and float(s) > threshold else 0.0 for s in scores_P]
    out: dict[str, float] = {}
    out["greedy_acc"], out["greedy_acc_se"] = mean_se(correct)
    out["greedy_response_length/mean"] = length_stats([int(x) for x in lengths_P])["mean"]
    out["greedy_truncation_rate"] = truncation_rate([bool(x) for x in eos_P])
    return out


def eval_report(examples: Sequence, rewards, greedy: tuple | None = None, samples: tuple | None = None,
                ks: Sequence[int] | None = None, threshold: float = 0.0) -> tuple[dict, list[dict]]:
    """The summary and the per-problem rows of an evaluation, from completions already sampled.

    ``examples``: :class:`shiftkit.data.Example` rows; ``rewards``: a :class:`shiftkit.rewards.Rewards`.
    ``greedy``: ``(texts_P, lengths_P, eos_P)``; ``samples``: ``(texts_PK, lengths_PK, eos_PK)``
    with K samples per problem. The summary holds ``greedy_acc``, ``avg@K``, ``pass@k``, response
    length, truncation rate, per-reward means, and ``greedy_acc/<domain>`` when the data has a
    ``domain`` column; each row holds the prompt, answer and completions with their rewards.
    """
    P = len(examples)
    if P == 0:
        raise ValueError("no problems to evaluate")
    summary: dict = {"n_problems": P}
    rows: list[dict] = [{"prompt": e.prompt, "answer": e.answer} for e in examples]
    if greedy is not None:
        texts, lengths, eos = greedy
        res = rewards.score(list(examples), list(texts))
        summary.update(greedy_summary(res.total, lengths, eos, threshold))
        domains = [e.columns.get("domain") for e in examples]
        if all(d is not None for d in domains):
            for d in sorted(set(domains)):
                vals = [1.0 if not math.isnan(t) and t > threshold else 0.0 for t, dd in zip(res.total, domains) if dd == d]
                summary[f"greedy_acc/{d}"] = sum(vals) / len(vals)
        for i, r in enumerate(rows):
            r.update({"greedy": texts[i], "greedy_reward": res.total[i], "greedy_length": int(lengths[i]),
                      "greedy_truncated": not bool(eos[i])})
    if samples is not None:
        texts_PK, lengths_PK, eos_PK = samples
        if len(texts_PK) != P:
            raise ValueError(f"{len(texts_PK)} sample groups for {P} problems")
        flat_ex = [e for e, ts in zip(examples, texts_PK) for _ in ts]
        flat = [t for ts in texts_PK for t in ts]
        res = rewards.score(flat_ex, flat)
        scores_PK, i = [], 0
        for ts in texts_PK:
            scores_PK.append(res.total[i: i + len(ts)])
            i += len(ts)
        summary.update(sample_summary(scores_PK, lengths_PK, eos_PK, ks, threshold))
        summary.update({k: v for k, v in res.metrics.items() if k.startswith("rewards/")})
        for r, ts, sc, (n, c) in zip(rows, texts_PK, scores_PK, correct_counts(scores_PK, threshold)):
            r.update({"samples": list(ts), "sample_rewards": sc, "n_correct": c})
    return summary, rows
