"""``shiftkit demo``: the main job, end to end on the toy world.

Stages (each cached in its run directory, so a re-run resumes where it stopped):

1. **world**: SFT a weak (~0.15M) and a strong (~1.25M) tiny Qwen3 on arithmetic traces that
   contain a systematic carry mistake;
2. **grpo**: GRPO on the weak model with the exact-match reward, several seeds; evaluate greedy
   accuracy and pass@k before/after;
3. **opd**: Direct-OPD transfer of the weak model's RL shift to the strong model, with baselines;
4. **sar**: SAR edits of the RL updates (retention vs core size, pass@k) and expert merging;
5. **agent**: the kernel agent's toy multi-turn tool RL and a scripted kernel episode.

Writes ``<out>/report.md``, ``<out>/results.json`` and PNG plots.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from shiftkit.config import load_config, parse_overrides, read_config_file, to_dict
from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_write_json, atomic_write_text
from shiftkit.recipes.common import TOY_RL, cached_eval
from shiftkit.recipes.world import WorldConfig


@dataclasses.dataclass
class DemoConfig:
    preset: str = "full"  # full | quick (quick: tiny settings, a few minutes); preset values sit under overrides
    out: str = "runs/demo"
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    weak_steps: int = WorldConfig.weak_steps
    strong_steps: int = WorldConfig.strong_steps
    rl_steps: int = TOY_RL["steps"]
    rl_prompts: int = TOY_RL["prompts_per_step"]
    rl_group: int = TOY_RL["group_size"]
    rl_lr: float = TOY_RL["lr"]
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2])
    eval_n: int = 100  # held-out problems per domain
    eval_samples: int = 64  # samples per problem for pass@k (k = 1..eval_samples)
    rl_eval_every: int = TOY_RL["eval_every"]
    threads: int = 2
    stages: list[str] = dataclasses.field(default_factory=lambda: ["world", "grpo", "opd", "sar", "agent"])
    progress: bool = True

    def validate(self) -> None:
        if self.preset not in PRESETS:
            raise ShiftkitError(f"unknown demo preset '{self.preset}' (use {', '.join(PRESETS)})")
        bad = [s for s in self.stages if s not in STAGES]
        if bad:
            raise ShiftkitError(f"unknown demo stage '{bad[0]}' (known: {', '.join(STAGES)})")


PRESETS = {
    "full": {},
    "quick": dict(weak_steps=30, strong_steps=15, rl_steps=3, rl_prompts=4, rl_group=4, seeds=[0], eval_n=8,
                  eval_samples=4, rl_eval_every=3),
}


def demo_config(path: str | None = None, overrides: list[str] | dict | None = None) -> DemoConfig:
    """Defaults <- the preset's values <- the config file <- ``key=value`` overrides."""
    over = overrides if isinstance(overrides, dict) else parse_overrides(overrides)
    file = read_config_file(path) if path else {}
    preset = str(over.get("preset", file.get("preset", "full")))
    if preset not in PRESETS:
        raise ShiftkitError(f"unknown demo preset '{preset}' (use {', '.join(PRESETS)})")
    return load_config(DemoConfig, path, over, base=PRESETS[preset])


def _cached_eval(path: str, cfg: DemoConfig, cache: Path) -> dict:
    return cached_eval(path, cfg.tasks, cfg.eval_n, cfg.eval_samples, cache, progress=cfg.progress)


def stage_world(ctx: dict) -> dict:
    from shiftkit.recipes.world import build_world

    cfg: DemoConfig = ctx["cfg"]
    wc = WorldConfig(out=str(ctx["out"] / "world"), tasks=list(cfg.tasks), weak_steps=cfg.weak_steps,
                     strong_steps=cfg.strong_steps, eval_n=cfg.eval_n, threads=cfg.threads, progress=cfg.progress)
    info = build_world(wc)
    ctx["weak"], ctx["strong"] = info["models"]["weak"]["path"], info["models"]["strong"]["path"]
    evals = {name: _cached_eval(m["path"], cfg, ctx["out"] / "world" / f"eval_{name}.json")
             for name, m in info["models"].items()}
    return {"models": {k: {**info["models"][k], **evals[k]} for k in evals}}


def stage_grpo(ctx: dict) -> dict:
    from shiftkit.recipes.common import rl_checkpoint
    from shiftkit.runs import read_summary

    cfg: DemoConfig = ctx["cfg"]

    runs = {}
    for seed in cfg.seeds:
        out = ctx["out"] / "grpo_weak" / f"seed{seed}"
        path = rl_checkpoint(out, ctx["weak"], cfg.tasks, seed, cfg.rl_steps, cfg.rl_prompts, cfg.rl_group,
                             cfg.rl_lr, cfg.rl_eval_every, cfg.eval_n, cfg.threads, cfg.progress)
        ev = _cached_eval(path, cfg, out / "eval_final.json")
        summ = read_summary(out)
        runs[seed] = {"path": path, "train_seconds": summ.get("train_seconds"), **ev}
    ctx["weak_rl"] = {seed: r["path"] for seed, r in runs.items()}
    return {"runs": runs}


def stage_opd(ctx: dict) -> dict:
    from shiftkit.recipes.weak_to_strong import demo_stage

    return demo_stage(ctx)


def stage_sar(ctx: dict) -> dict:
    from shiftkit.recipes.sar_study import demo_stage

    return demo_stage(ctx)


def stage_agent(ctx: dict) -> dict:
    from shiftkit.recipes.agent_toy import demo_stage

    return demo_stage(ctx)


STAGES = {"world": stage_world, "grpo": stage_grpo, "opd": stage_opd, "sar": stage_sar, "agent": stage_agent}


def _ms(vals) -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "n/a"
    a = np.asarray(vals, dtype=float)
    return f"{100 * a.mean():.1f} ± {100 * a.std(ddof=1 if len(a) > 1 else 0):.1f}"


def _pct(v) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def report_world_grpo(ctx: dict, results: dict) -> list[str]:
    from shiftkit.io import read_jsonl
    from shiftkit.plots import line_plot, smooth

    cfg: DemoConfig = ctx["cfg"]
    out: Path = ctx["out"]
    lines = []
    w = results.get("world")
    if w:
        ks = [k for k in (1, 8, 64) if k <= cfg.eval_samples]
        lines += ["## 1. The toy world (SFT on traces with a systematic carry mistake)", "",
                  f"Held-out set: {cfg.eval_n} test-split problems per domain ({', '.join(cfg.tasks)}); "
                  f"pass@k from {cfg.eval_samples} samples per problem at temperature 1.", "",
                  "| model | params | greedy acc % | " + " | ".join(f"pass@{k} %" for k in ks) + " | "
                  + " | ".join(f"greedy {d} %" for d in cfg.tasks) + " |",
                  "|---|---|---|" + "---|" * len(ks) + "---|" * len(cfg.tasks)]
        for name, m in w["models"].items():
            lines.append(f"| {name} SFT | {m['params']:,} | {_pct(m.get('greedy_acc'))} | "
                         + " | ".join(_pct(m.get(f"pass@{k}")) for k in ks) + " | "
                         + " | ".join(_pct(m.get(f"greedy_acc/{d}")) for d in cfg.tasks) + " |")
        lines.append("")
    g = results.get("grpo")
    if g and w:
        weak = w["models"]["weak"]
        runs = g["runs"]
        before = weak["greedy_acc"]
        after = [r["greedy_acc"] for r in runs.values()]
        lines += ["## 2. GRPO on the weak model (exact-match reward)", "",
                  f"{cfg.rl_steps} steps x {cfg.rl_prompts} prompts x {cfg.rl_group} samples, lr {cfg.rl_lr}, "
                  f"seeds {cfg.seeds}.", "",
                  "| | greedy acc % | pass@1 % | pass@8 % | " + " | ".join(f"greedy {d} %" for d in cfg.tasks) + " |",
                  "|---|---|---|---|" + "---|" * len(cfg.tasks),
                  f"| weak SFT (start) | {_pct(before)} | {_pct(weak.get('pass@1'))} | {_pct(weak.get('pass@8'))} | "
                  + " | ".join(_pct(weak.get(f"greedy_acc/{d}")) for d in cfg.tasks) + " |"]
        for seed, r in runs.items():
            lines.append(f"| weak GRPO seed {seed} | {_pct(r['greedy_acc'])} | {_pct(r.get('pass@1'))} | "
                         f"{_pct(r.get('pass@8'))} | " + " | ".join(_pct(r.get(f"greedy_acc/{d}")) for d in cfg.tasks) + " |")
        lines.append(f"| **weak GRPO mean ± std** | **{_ms(after)}** | {_ms([r.get('pass@1') for r in runs.values()])} | "
                     f"{_ms([r.get('pass@8') for r in runs.values()])} | "
                     + " | ".join(_ms([r.get(f'greedy_acc/{d}') for r in runs.values()]) for d in cfg.tasks) + " |")
        gain = 100 * (float(np.mean(after)) - before)
        lines += ["", f"**GRPO gain in greedy accuracy: {gain:+.1f} points** (mean over {len(after)} seeds); "
                  f"strong SFT for comparison: {_pct(w['models']['strong']['greedy_acc'])}%.", ""]
        results["grpo"]["gain_points"] = gain
        # plots
        reward_series, acc_series = {}, {}
        for seed in runs:
            rows = read_jsonl(out / "grpo_weak" / f"seed{seed}" / "metrics.jsonl")
            tr = [r for r in rows if "reward" in r]
            reward_series[f"seed {seed}"] = ([r["step"] for r in tr], smooth([r["reward"] for r in tr]))
            ev = [r for r in rows if "eval/greedy_acc" in r]
            acc_series[f"seed {seed}"] = ([r["step"] for r in ev], [r["eval/greedy_acc"] for r in ev])
        line_plot(out / "grpo_reward.png", reward_series, "GRPO on the weak model: training reward (smoothed)",
                  "step", "mean reward", ylim=(0, 1))
        line_plot(out / "grpo_accuracy.png", acc_series, "GRPO on the weak model: held-out greedy accuracy",
                  "step", "greedy accuracy", ylim=(0, 1))
        ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= cfg.eval_samples]
        pk = {"weak SFT": (ks, [weak.get(f"pass@{k}") for k in ks]),
              "strong SFT": (ks, [w["models"]["strong"].get(f"pass@{k}") for k in ks]),
              "weak GRPO (mean of seeds)": (ks, [float(np.mean([r.get(f"pass@{k}") for r in runs.values()])) for k in ks])}
        line_plot(out / "passk_world.png", pk, "pass@k on the held-out set", "k", "pass@k", logx=True, ylim=(0, 1))
        lines += ["![GRPO reward](grpo_reward.png) ![GRPO accuracy](grpo_accuracy.png) ![pass@k](passk_world.png)", ""]
    return lines


def run_demo(cfg: DemoConfig) -> dict:
    preset = cfg.preset
    outp = Path(cfg.out)
    outp.mkdir(parents=True, exist_ok=True)
    ctx = {"cfg": cfg, "out": outp, "preset": preset}
    results: dict = {"preset": preset, "config": to_dict(cfg), "timings": {}}
    report: list[str] = []
    t_all = time.time()
    for name in cfg.stages:
        fn = STAGES[name]
        t0 = time.time()
        print(f"[demo] stage {name} ...", file=sys.stderr, flush=True)
        results[name] = fn(ctx)
        results["timings"][name] = round(time.time() - t0, 1)
        print(f"[demo] stage {name} done in {results['timings'][name]} s", file=sys.stderr, flush=True)
    results["timings"]["total"] = round(time.time() - t_all, 1)
    report += [f"# shiftkit demo report (preset: {preset})", "",
               f"Total wall time: {results['timings']['total']} s on this machine. Stage timings (s): "
               + ", ".join(f"{k} {v}" for k, v in results["timings"].items() if k != "total") + ".", ""]
    report += report_world_grpo(ctx, results)
    for name in cfg.stages:
        if name in results and isinstance(results[name], dict) and "report" in results[name]:
            report += results[name].pop("report")
    atomic_write_json(outp / "results.json", results)
    atomic_write_text(outp / "report.md", "\n".join(report) + "\n")
    summary = {"report": str(outp / "report.md"), "total_seconds": results["timings"]["total"]}
    if "grpo" in results and "gain_points" in results["grpo"]:
        summary["grpo_gain_points"] = results["grpo"]["gain_points"]
    return summary
