"""The toy tool-task RL experiment: seeds x algorithms, learning curves (PNG), numbers (JSON).

    python -m shiftkit.agent.experiment --out runs/agent/toy_rl --seeds 0 1 2 --algos ppo grpo --steps 40
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shiftkit.agent.agentic_rl import AgenticRLConfig, run_agentic_rl


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def plot_curves(runs: dict, png: Path, smooth: int = 5) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {"ppo": "tab:blue", "grpo": "tab:orange"}
    for (algo, seed), rows in sorted(runs.items()):
        tr = [r for r in rows if "reward" in r]
        x = np.array([r["step"] for r in tr])
        y = np.array([r["reward"] for r in tr])
        ys = np.convolve(y, np.ones(smooth) / smooth, mode="valid") if len(y) >= smooth else y
        axes[0].plot(x[len(x) - len(ys):], ys, color=colors.get(algo), alpha=0.8, label=f"{algo} seed {seed}")
        ev = [r for r in rows if "eval/success" in r]
        axes[1].plot([r["step"] for r in ev], [r["eval/success"] for r in ev], "o-", color=colors.get(algo), alpha=0.8,
                     label=f"{algo} seed {seed}")
    axes[0].set(title=f"training reward (rolling mean of {smooth})", xlabel="step", ylabel="success rate")
    axes[1].set(title="held-out success (64 problems, sampled)", xlabel="step", ylabel="success rate", ylim=(0, 1))
    axes[1].legend(fontsize=7)
    fig.suptitle("toy calculator tool task: multi-turn RL from a noisy behaviour-cloned policy (0.23M Qwen3)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def run(out: str, seeds: list[int], algos: list[str], steps: int, progress: bool = False, **over) -> dict:
    res, curves = {}, {}
    for algo in algos:
        for seed in seeds:
            d = Path(out) / f"{algo}_seed{seed}"
            if (d / "summary.json").is_file():
                s = json.loads((d / "summary.json").read_text())
            else:
                s = run_agentic_rl(AgenticRLConfig(out=str(d), algo=algo, seed=seed, steps=steps, warm_dir=str(Path(out) / "warm"), **over), progress)
            res[f"{algo}_seed{seed}"] = {k: s[k] for k in ("reward_first", "reward_last", "initial_eval", "final_eval", "train_seconds")
                                         if k in s} | ({"value_pretrain": {k: s["value_pretrain"][k] for k in ("before", "after", "steps")}}
                                                       if "value_pretrain" in s else {})
            curves[(algo, seed)] = read_metrics(d / "metrics.jsonl")
    plot_curves(curves, Path(out) / "learning_curve.png")
    (Path(out) / "results.json").write_text(json.dumps(res, indent=1))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/agent/toy_rl")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--algos", nargs="+", default=["ppo"])
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    print(json.dumps(run(a.out, a.seeds, a.algos, a.steps, progress=True), indent=1))


if __name__ == "__main__":
    main()
