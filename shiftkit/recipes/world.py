"""The toy world: a weak and a strong tiny model, both SFT'd on arithmetic traces with mistakes.

``build_world`` writes ``<out>/weak/final`` and ``<out>/strong/final`` (HF checkpoints) and
``<out>/world.json`` with their held-out accuracies. The weak model (~0.15M params) and the strong
one (~1.25M, 8x larger) see the same data for the same number of steps; the strong one learns more
of it. Both imitate the systematic carry mistake, which RL can then fix.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from shiftkit.config import to_dict
from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_write_json


@dataclasses.dataclass
class WorldConfig:
    out: str = "runs/world"
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    error_rate: float = 0.6
    weak_steps: int = 400
    strong_steps: int = 700
    batch_size: int = 64
    lr: float = 3e-3
    seed: int = 0
    eval_n: int = 100
    eval_samples: int = 0  # >0: also pass@k with this many samples per problem
    threads: int = 0
    overwrite: bool = False
    progress: bool = True

    def validate(self) -> None:
        if self.weak_steps <= 0 or self.strong_steps <= 0:
            raise ShiftkitError("world: weak_steps and strong_steps must be positive")


def build_world(cfg: WorldConfig) -> dict:
    from shiftkit.evaluate import evaluate_model
    from shiftkit.models import load_model_and_tokenizer, num_params
    from shiftkit.sft import SFTConfig, run_sft
    from shiftkit.tasks import Mixture, eval_set

    out = Path(cfg.out)
    info_path = out / "world.json"
    if info_path.exists() and not cfg.overwrite:
        import json

        info = json.loads(info_path.read_text())
        if info.get("config") == to_dict(cfg) and all(Path(m["path"]).exists() for m in info["models"].values()):
            return info
    mixture = Mixture(cfg.tasks)
    evals = eval_set(cfg.tasks, cfg.eval_n)
    models = {}
    for size, steps in (("weak", cfg.weak_steps), ("strong", cfg.strong_steps)):
        sft = SFTConfig(init=size, out=str(out / size), tasks=list(cfg.tasks), error_rate=cfg.error_rate,
                        steps=steps, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed, threads=cfg.threads,
                        overwrite=cfg.overwrite, progress=cfg.progress)
        s = run_sft(sft)
        model, tok = load_model_and_tokenizer(s["out"])
        ev = evaluate_model(model, tok, evals, mixture.reward, n_samples=cfg.eval_samples, seed=cfg.seed)
        models[size] = {"path": s["out"], "params": num_params(model), "sft_seconds": s.get("train_seconds"),
                        **{k: v for k, v in ev.items() if k != "per_problem"}}
    info = {"config": to_dict(cfg), "models": models}
    atomic_write_json(info_path, info)
    return info
