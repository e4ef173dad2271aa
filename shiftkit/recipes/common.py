"""Named experiments (``shiftkit experiment NAME``) and the shared RL checkpoints they need.

Experiments live with their method (``shiftkit.opd.experiment``, ``shiftkit.sar.experiment``) and
are registered here by name. :func:`rl_checkpoint` trains (or reuses, if already finished) a GRPO
run from a base model on some task domains, so that experiments and the demo share one copy of
each RL checkpoint (e.g. the weak model's addition-only and multiplication-only RL runs).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from shiftkit.errors import ShiftkitError

EXPERIMENTS = {
    "weak-to-strong": "shiftkit.opd.experiment:run_experiment",
    "sar": "shiftkit.sar.experiment:run_experiment",
}


def run(name: str, config: str | None, overrides: list[str] | None) -> dict:
    if name not in EXPERIMENTS:
        raise ShiftkitError(f"unknown experiment '{name}' (known: {', '.join(EXPERIMENTS)})")
    mod, fn = EXPERIMENTS[name].split(":")
    try:
        f = getattr(importlib.import_module(mod), fn)
    except (ModuleNotFoundError, AttributeError):
        raise ShiftkitError(f"experiment '{name}' is not available in this build") from None
    return f(config, overrides)


def rl_checkpoint(out_dir: str | Path, base: str, tasks: list[str], seed: int, steps: int,
                  prompts_per_step: int = 16, group_size: int = 8, lr: float = 6e-5, eval_every: int = 20,
                  eval_n: int = 100, threads: int = 0, progress: bool = True) -> str:
    """Path of the final model of a GRPO run (base, tasks, seed); trains it unless already done."""
    from shiftkit.rl import GRPOConfig, run_grpo

    cfg = GRPOConfig(model=str(base), out=str(out_dir), tasks=list(tasks), steps=steps,
                     prompts_per_step=prompts_per_step, group_size=group_size, lr=lr, seed=seed,
                     eval_every=eval_every, eval_n=eval_n, threads=threads, progress=progress)
    return run_grpo(cfg)["out"]
