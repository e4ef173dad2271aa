"""Evaluation: greedy accuracy and unbiased pass@k on a fixed held-out set.

pass@k uses the estimator of Chen et al. (2021): with n samples of which c are correct,
``pass@k = 1 - C(n-c, k) / C(n, k)`` per problem, averaged over problems with its standard error.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Sequence

import numpy as np
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.tasks.base import Problem


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem (n samples, c correct); numerically stable product form."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_reference(n: int, c: int, k: int) -> float:
    """The same quantity via exact binomials (for tests)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan")
    se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0
    return float(x.mean()), se


def default_ks(n: int) -> list[int]:
    return [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= n]


@torch.no_grad()
def evaluate_model(
    model,
    tokenizer,
    problems: list[Problem],
    reward_fn: Callable[[Problem, str], float],
    *,
    n_samples: int = 0,
    ks: Sequence[int] | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    batch_size: int = 256,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Greedy accuracy, and pass@k from ``n_samples`` samples per problem (if > 0).

    Returns flat metrics (``greedy_acc``, ``greedy_acc_se``, ``pass@k``, ``pass@k_se``, per-domain
    greedy accuracy ``greedy_acc/<domain>``) plus ``per_problem`` rows.
    """
    from shiftkit.sampling import sample

    if not problems:
        raise ShiftkitError("evaluation set is empty")
    t0 = time.time()
    prompts = [p.prompt for p in problems]
    greedy_texts: list[str] = []
    it = range(0, len(prompts), batch_size)
    for s in it:
        r = sample(model, tokenizer, prompts[s : s + batch_size], max_new_tokens=max_new_tokens, greedy=True)
        greedy_texts += r.texts
    correct = [reward_fn(p, t) for p, t in zip(problems, greedy_texts)]
    out: dict = {}
    out["greedy_acc"], out["greedy_acc_se"] = mean_stderr(correct)
    for dom in sorted({p.domain for p in problems}):
        vals = [c for p, c in zip(problems, correct) if p.domain == dom]
        out[f"greedy_acc/{dom}"] = float(np.mean(vals))
    rows = [{"prompt": p.prompt, "answer": p.answer, "domain": p.domain, "greedy": t, "greedy_correct": c}
            for p, t, c in zip(problems, greedy_texts, correct)]
    if n_samples > 0:
        ks = list(ks) if ks else default_ks(n_samples)
        # n_samples per problem, in batches of whole problems; per-row seeds make results batch-invariant
        counts = np.zeros(len(problems), dtype=np.int64)
        flat = [(i, j) for i in range(len(problems)) for j in range(n_samples)]
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(flat), desc="pass@k samples", leave=False)
        for s in range(0, len(flat), batch_size):
            chunk = flat[s : s + batch_size]
            r = sample(model, tokenizer, [prompts[i] for i, _ in chunk], max_new_tokens=max_new_tokens,
                       temperature=temperature, top_p=top_p,
                       row_seeds=[seed * 1_000_003 + i * 1009 + j for i, j in chunk])
            for (i, _), text in zip(chunk, r.texts):
                counts[i] += reward_fn(problems[i], text) > 0
            if bar:
                bar.update(len(chunk))
        if bar:
            bar.close()
        for k in ks:
            vals = [pass_at_k(n_samples, int(c), k) for c in counts]
            out[f"pass@{k}"], out[f"pass@{k}_se"] = mean_stderr(vals)
        for row, c in zip(rows, counts):
            row["n_correct"] = int(c)
        out["n_samples"] = n_samples
    out["n_problems"] = len(problems)
    out["eval_seconds"] = time.time() - t0
    out["per_problem"] = rows
    return out


@dataclasses.dataclass
class ModelEvalConfig:
    """``shiftkit eval``: one model on the held-out set."""

    model: str = ""
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    n: int = 100  # held-out problems per domain
    samples: int = 0  # samples per problem for pass@k (0 = greedy only); k = 1, 2, 4, .. <= samples
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    seed: int = 0
    out: str = ""  # optional JSON file for the full result (with per-problem rows)
    threads: int = 0

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("eval needs model=<path or hub id> (or --model)")
        if self.n <= 0:
            raise ShiftkitError("eval: n must be positive")


def run_eval(cfg: ModelEvalConfig) -> dict:
    """Evaluate ``cfg.model``; write the full result to ``cfg.out`` if set; return it without per-problem rows."""
    from shiftkit.io import atomic_write_json
    from shiftkit.loopkit import set_threads
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import Mixture, eval_set

    set_threads(cfg.threads)
    model, tok = load_model_and_tokenizer(cfg.model)
    res = evaluate_model(model, tok, eval_set(cfg.tasks, cfg.n), Mixture(cfg.tasks).reward, n_samples=cfg.samples,
                         temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens,
                         seed=cfg.seed, progress=True)
    if cfg.out:
        atomic_write_json(cfg.out, res)
    return {k: v for k, v in res.items() if k != "per_problem"}
