"""The kernel agent's recipes: the toy tool-task RL experiment and the demo's stage 5.

``shiftkit experiment agent-toy seeds=[0,1,2] algos=[ppo,grpo] steps=40``: seeds x algorithms on the
toy calculator task, learning curves (PNG) and numbers (JSON). :func:`demo_stage` is the demo's
"## 5. Kernel agent": toy tool-task RL (1 seed), the scripted kernel episode, and one agentic RL step
on kernel trajectories.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl
from shiftkit.config import load_config
from shiftkit.errors import ShiftkitError


@dataclasses.dataclass
class AgentToyConfig:
    out: str = "runs/agent/toy_rl"
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2])
    algos: list[str] = dataclasses.field(default_factory=lambda: ["ppo"])
    steps: int = 30
    progress: bool = True

    def validate(self) -> None:
        bad = [a for a in self.algos if a not in ("ppo", "grpo")]
        if bad:
            raise ShiftkitError(f"agent-toy: algos must be ppo or grpo, got '{bad[0]}'")
        if not self.seeds or self.steps <= 0:
            raise ShiftkitError("agent-toy: needs at least one seed and steps > 0")


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
        axes[1].plot([r["step"] for r in ev], [r["eval/success"] for r in ev], "o-",
                     color=colors.get(algo), alpha=0.8, label=f"{algo} seed {seed}")
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
                s = run_agentic_rl(AgenticRLConfig(out=str(d), algo=algo, seed=seed, steps=steps,
                                                   warm_dir=str(Path(out) / "warm"), progress=progress, **over))
            res[f"{algo}_seed{seed}"] = {k: s[k] for k in ("reward_first", "reward_last", "initial_eval", "final_eval", "train_seconds")
                                         if k in s} | ({"value_pretrain": {k: s["value_pretrain"][k] for k in ("before", "after", "steps")}}
                                                       if "value_pretrain" in s else {})
            curves[(algo, seed)] = read_metrics(d / "metrics.jsonl")
    plot_curves(curves, Path(out) / "learning_curve.png")
    (Path(out) / "results.json").write_text(json.dumps(res, indent=1))
    return res


def run_experiment(config_path: str | None, overrides: list[str] | None) -> dict:
    cfg = load_config(AgentToyConfig, config_path, overrides)
    return run(cfg.out, list(cfg.seeds), list(cfg.algos), cfg.steps, progress=cfg.progress)


# ----------------------------------------------------------------------------- the demo's stage 5

def _kernel_episodes(out: Path, quick: bool) -> tuple[dict, list]:
    from shiftkit.agent.episode import AgentConfig, run_episode
    from shiftkit.agent.scripted import kernel_fix_script, known_solution_files
    from shiftkit.kernels.fixtures import PROBLEMS

    cfg = AgentConfig(final_eval="none" if quick else "profile", eval_baseline_compile=False, eval_timed_calls=10,
                      eval_trials=3)
    res = run_episode(PROBLEMS / "scale_shift_clamp.py", kernel_fix_script(known_solution_files("scale_shift_clamp"), profile=not quick),
                      cfg, out / "scripted_episode.jsonl")
    return res, res["events"]


def demo_stage(ctx: dict) -> dict:
    import torch

    from shiftkit.agent.rl import kernel_rl_step

    cfg, quick = ctx["cfg"], ctx.get("preset") == "quick"
    out = Path(ctx["out"]) / "agent"
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, int(getattr(cfg, "threads", 1))))
    t0 = time.time()
    rl = run_agentic_rl(AgenticRLConfig(
        out=str(out / "toy_rl" / "ppo_seed0"), warm_dir=str(out / "toy_rl" / ("warm_quick" if quick else "warm")),
        steps=2 if quick else 15, warm_steps=20 if quick else 250, value_pretrain_steps=2 if quick else 20,
        eval_n=8 if quick else 64, eval_every=0 if quick else 5, prompts_per_step=4 if quick else 8,
        group_size=4 if quick else 8, progress=bool(getattr(cfg, "progress", False))))
    t_rl = time.time() - t0
    ep, events = _kernel_episodes(out, quick)
    step = None
    if not quick:
        from shiftkit.agent.clients import HFClient
        from shiftkit.agent.episode import AgentConfig, run_episode
        from shiftkit.kernels.fixtures import PROBLEMS
        from shiftkit.models import TinyModelSpec, make_char_tokenizer, make_tiny_model

        tok = make_char_tokenizer()
        tiny = make_tiny_model(TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, num_attention_heads=2,
                                             num_key_value_heads=1, head_dim=16, max_position_embeddings=8192), seed=0)
        bad = run_episode(PROBLEMS / "scale_shift_clamp.py", HFClient(tiny, tok, temperature=1.0),
                          AgentConfig(max_turns=1, max_tokens_per_turn=24, final_eval="verify"), out / "tiny_episode.jsonl")
        step = kernel_rl_step([events, bad["events"]], tiny, tok, algo="ppo")
    vp = rl.get("value_pretrain", {})
    rep = ["## 5. Kernel agent", "",
           "Toy multi-turn tool task (calculator; tiny 0.23M Qwen3 behaviour-cloned on noisy demonstrations, then PPO with "
           "a value head, GAE gamma=1 lambda=0.95, clip 0.2/0.28, tool-output tokens masked):", "",
           f"- held-out success (sampled) {rl['initial_eval']['success']:.2f} -> {rl['final_eval']['success']:.2f} in {rl['steps']} steps; "
           f"training reward {rl['reward_first']:.2f} -> {rl['reward_last']:.2f} ({t_rl:.0f} s incl. warm start)"]
    if vp:
        rep.append(f"- value pretraining ({vp['steps']} steps): critic MSE vs realised return on held-out rollouts "
                   f"{vp['before']['mse']:.3f} -> {vp['after']['mse']:.3f}")
    c = ep["counts"]
    rep += ["", f"Scripted kernel episode (cpu backend, scale_shift_clamp): outcome {ep['outcome']}, {c['turns']} turns, "
                f"{c['tool_calls']} tool calls (injected compile error observed and fixed), rewards per verify/profile "
                f"{[r['reward'] for r in ep['rewards']]}, final reward {'unscorable' if ep['final_reward'] is None else format(ep['final_reward'], '+g')}."]
    if step:
        rep.append(f"One agentic PPO step on [scripted, tiny-policy] kernel trajectories (rewards {step['rewards']}): "
                   f"{step['gen_tokens']} generated tokens trained, {step['context_tokens']} context/tool tokens masked, "
                   f"policy loss {step['policy_loss']:.3f}, value loss {step['value_loss']:.3f} (mechanics, not learning).")
    rep.append("")
    return {"toy_rl": {k: rl[k] for k in ("initial_eval", "final_eval", "reward_first", "reward_last", "steps") if k in rl}
            | ({"value_pretrain": {k: vp[k] for k in ("before", "after", "steps")}} if vp else {}),
            "scripted_episode": {k: ep[k] for k in ("outcome", "final_reward", "rewards", "counts", "timings")},
            "kernel_rl_step": step, "seconds": round(time.time() - t0, 1), "report": rep}
