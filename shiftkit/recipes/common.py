"""Pieces the recipes share: the cached RL checkpoints and the cached held-out evaluation.

:func:`rl_checkpoint` trains (or reuses, if already finished) a GRPO run from a base model on some
task domains, so that the experiments and the demo share one copy of each RL checkpoint (e.g. the
weak model's addition-only and multiplication-only RL runs). :func:`cached_eval` evaluates a model
directory once and keeps the result in a JSON file keyed by what was evaluated.
"""

from __future__ import annotations

import json
from pathlib import Path

from shiftkit.io import atomic_write_json

# The toy world's GRPO settings (the command defaults suit a real model: lr 1e-6, 1024 new tokens).
TOY_RL = dict(steps=60, prompts_per_step=16, group_size=8, lr=6e-5, max_new_tokens=48, eval_every=20, eval_n=100,
              save_every=0)


def rl_checkpoint(out_dir: str | Path, base: str, tasks: list[str], seed: int, steps: int,
                  prompts_per_step: int = TOY_RL["prompts_per_step"], group_size: int = TOY_RL["group_size"],
                  lr: float = TOY_RL["lr"], eval_every: int = TOY_RL["eval_every"],
                  eval_n: int = TOY_RL["eval_n"], threads: int = 0, progress: bool = True) -> str:
    """Path of the final model of a GRPO run (base, tasks, seed); trains it unless already done."""
    from shiftkit.rl import GRPOConfig, run_grpo

    cfg = GRPOConfig(model=str(base), out=str(out_dir), tasks=list(tasks), steps=steps,
                     max_new_tokens=TOY_RL["max_new_tokens"], save_every=TOY_RL["save_every"],
                     prompts_per_step=prompts_per_step, group_size=group_size, lr=lr, seed=seed,
                     eval_every=eval_every, eval_n=eval_n, threads=threads, progress=progress)
    return run_grpo(cfg)["out"]


def cached_eval(path: str | Path, tasks: list[str], n: int, samples: int, cache: Path, *,
                max_new_tokens: int | None = None, progress: bool = False) -> dict:
    """Greedy accuracy (per domain) and pass@k of a model dir (seed 0), cached in ``cache``.

    The cache key is (model, n, samples, tasks[, max_new_tokens]); a different key re-evaluates.
    """
    key = {"model": str(path), "n": n, "samples": samples, "tasks": list(tasks)}
    if max_new_tokens is not None:
        key["max_new_tokens"] = max_new_tokens
    if cache.exists():
        c = json.loads(cache.read_text())
        if c.get("key") == key:
            return c["result"]
    from shiftkit.evaluate import evaluate_model
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import Mixture, eval_set

    model, tok = load_model_and_tokenizer(str(path))
    kw = {"max_new_tokens": max_new_tokens} if max_new_tokens is not None else {}
    ev = evaluate_model(model, tok, eval_set(list(tasks), n), Mixture(list(tasks)).reward, n_samples=samples,
                        seed=0, progress=progress, **kw)
    res = {k: v for k, v in ev.items() if k != "per_problem"}
    atomic_write_json(cache, {"key": key, "result": res})
    return res
