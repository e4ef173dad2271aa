"""SAR experiments on the toy world (``shiftkit experiment sar`` and the demo's stage 4).

1. retention: greedy accuracy and pass@k of SAR-edited RL models vs the parameter fraction of the
   core, over a sweep of delta ranks (one decomposition per matrix, ``sweep``), next to base and RL;
2. exploration: pass@k curves of base, RL and SAR;
3. merging: an addition expert and a multiplication expert GRPO'd from one base, merged by SAR,
   task arithmetic, TIES and DARE-TIES; greedy accuracy per domain next to each expert.

Scale note: the toy models' matrices have min(m, n) of 80-160, so the official ``delta_rank=0.01``
is rank 1; the sweep uses absolute ranks (``delta_ranks``) and the report states them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import field
from pathlib import Path

import numpy as np

from shiftkit.config import load_config, to_dict
from shiftkit.io import atomic_write_json
from shiftkit.recipes.common import TOY_RL, cached_eval, rl_checkpoint
from shiftkit.recipes.world import WorldConfig, build_world


@dataclasses.dataclass
class SARExpConfig:
    out: str = "runs/sar_experiment"
    reuse: str = "runs/demo"  # world/{weak,strong}/final and grpo_weak/seed*/final of a demo run, if present
    tasks: list[str] = field(default_factory=lambda: ["add", "mul"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    delta_ranks: list[str] = field(default_factory=lambda: ["1", "2", "4", "8", "16", "32"])
    merge_rank: str = "16"  # SAR merge: delta rank per matrix
    merge_density: float = 0.5  # TIES / DARE
    rl_steps: int = TOY_RL["steps"]  # weak-model GRPO (add + mul), as the demo
    rl_prompts: int = TOY_RL["prompts_per_step"]
    rl_group: int = TOY_RL["group_size"]
    rl_lr: float = TOY_RL["lr"]
    expert_steps: int = 40  # add-only and mul-only experts
    eval_n: int = 100
    eval_samples: int = 64
    weak_steps: int = WorldConfig.weak_steps
    strong_steps: int = WorldConfig.strong_steps
    threads: int = 2
    progress: bool = True


# ------------------------------------------------------------------------------------------ helpers

def _eval(path: str, tasks: list[str], n: int, samples: int, cache: Path, progress: bool = False) -> dict:
    """Greedy accuracy (per domain) and pass@k of a model dir, cached next to it."""
    return cached_eval(path, tasks, n, samples, cache, progress=progress)


def retention(out: Path, base: str, rl: str, ranks: list[str], tasks, n, samples, threads, progress) -> dict:
    """Sweep delta ranks on (base, rl) and evaluate base, RL and every SAR model."""
    from shiftkit.sar.pipeline import SweepConfig, sweep

    sw = out / "sweep"
    if not (sw / "sweep.json").exists():
        sweep(base, rl, sw, SweepConfig(delta_ranks=list(ranks), write_models=True, core_dtype="fp32",
                                        threads=threads, device="cpu"))
    table = json.loads((sw / "sweep.json").read_text())["ranks"]
    rows = {"base": {**_eval(base, tasks, n, samples, out / "eval_base.json", progress), "param_fraction": 0.0},
            "rl": {**_eval(rl, tasks, n, samples, out / "eval_rl.json", progress), "param_fraction": 1.0}}
    for r in table:
        ev = _eval(str(sw / r["core"] / "model"), tasks, n, samples, out / f"eval_{r['core']}.json", progress)
        rows[f"sar-{r['delta_rank']}"] = {**ev, "param_fraction": r["param_fraction"],
                                          "energy_total": r.get("mean_energy_total")}
    return rows


MERGES = [("sar", {}), ("task_arithmetic", {}), ("ties", {"density": None}), ("dare_ties", {"density": None})]


def merging(out: Path, base: str, experts: dict[str, str], merge_rank: str, density: float, tasks, n,
            threads, seed: int, progress) -> dict:
    """Merge the experts (``{"add": path, "mul": path}``) with each method; greedy accuracy per domain."""
    from shiftkit.sar.merge import method_params
    from shiftkit.sar.pipeline import MergeConfig, merge

    rows = {}
    for name, p in [("base", base)] + [(f"expert-{d}", path) for d, path in experts.items()]:
        rows[name] = _eval(p, tasks, n, 0, out / f"eval_{name}.json", progress)
    for method, extra in MERGES:
        d = out / f"merged-{method}"
        if not (d / "sar_merge.json").exists():
            kw = {"density": density} if "density" in extra else {}
            takes = method_params(method)
            kw.update({"delta_rank": merge_rank} if "edit" in takes else {})
            kw.update({"seed": seed} if "seed" in takes or "edit" in takes else {})
            merge(base, list(experts.values()), d, MergeConfig(method=method, threads=threads, device="cpu", **kw))
        rows[method] = _eval(str(d), tasks, n, 0, out / f"eval_{method}.json", progress)
    return rows


# ------------------------------------------------------------------------------------------ report

def _pct(vals) -> str:
    a = np.asarray([v for v in vals if v is not None], dtype=float)
    if not a.size:
        return "-"
    return f"{100 * a.mean():.1f}" + (f" ± {100 * a.std(ddof=1):.1f}" if a.size > 1 else "")


def report(out: Path, ret: dict, mer: dict, title: str, settings: str, figdir: Path) -> list[str]:
    """Markdown lines (tables) + sar_retention.png and sar_passk.png in ``figdir``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [title, "", settings, ""]
    seeds = sorted(ret)
    names = list(ret[seeds[0]]) if seeds else []
    ks = sorted({int(k.split("@")[1]) for s in seeds for m in ret[s].values() for k in m
                 if k.startswith("pass@") and not k.endswith("_se")})
    if names:
        lines += ["### Retention and exploration (weak model's GRPO run, SAR with the delta rank in the name)", "",
                  "| model | core params (% of model) | ||P dW_k||²/||dW||² | greedy acc % | "
                  + " | ".join(f"pass@{k} %" for k in ks) + " | retention of RL gain (greedy) |",
                  "|---|---|---|---|" + "---|" * len(ks) + "---|"]
        for nm in names:
            rs = [ret[s][nm] for s in seeds]
            gain = []
            for s in seeds:
                b, r, x = ret[s]["base"]["greedy_acc"], ret[s]["rl"]["greedy_acc"], ret[s][nm]["greedy_acc"]
                gain.append((x - b) / (r - b) if abs(r - b) > 1e-9 else None)
            frac = np.mean([r["param_fraction"] for r in rs])
            en = [r.get("energy_total") for r in rs if r.get("energy_total") is not None]
            lines.append(f"| {nm} | {100 * frac:.3g} | {np.mean(en):.3f} | " if en else f"| {nm} | {100 * frac:.3g} | - | ")
            lines[-1] += f"{_pct([r['greedy_acc'] for r in rs])} | " + " | ".join(
                _pct([r.get(f"pass@{k}") for r in rs]) for k in ks) + f" | {_pct(gain)} |"
        lines += ["", "Retention of the RL gain = (SAR − base) / (RL − base) on greedy accuracy (mean over seeds).",
                  "", "![SAR retention](sar_retention.png) ![pass@k](sar_passk.png)", ""]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        sar = [nm for nm in names if nm.startswith("sar-")]
        xs = [100 * np.mean([ret[s][nm]["param_fraction"] for s in seeds]) for nm in sar]
        ax.plot(xs, [100 * np.mean([ret[s][nm]["greedy_acc"] for s in seeds]) for nm in sar], "o-", label="SAR")
        for nm, st in (("base", ":"), ("rl", "--")):
            ax.axhline(100 * np.mean([ret[s][nm]["greedy_acc"] for s in seeds]), ls=st, c="k", label=nm)
        ax.set_xscale("log")
        ax.set_xlabel("core parameters (% of model)")
        ax.set_ylabel("greedy accuracy %")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(figdir / "sar_retention.png", dpi=90)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for nm in names:
            ys = [100 * np.mean([ret[s][nm].get(f"pass@{k}", np.nan) for s in seeds]) for k in ks]
            ax.plot(ks, ys, "o-" if nm.startswith("sar") else "s--", label=nm, lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k %")
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(figdir / "sar_passk.png", dpi=90)
        plt.close(fig)
    mseeds = sorted(mer)
    if mseeds:
        mnames = list(mer[mseeds[0]])
        doms = sorted({k.split("/")[1] for m in mer[mseeds[0]].values() for k in m if k.startswith("greedy_acc/")})
        lines += ["### Merging an addition expert and a multiplication expert", "",
                  "| model | " + " | ".join(f"{d} acc %" for d in doms) + " | mean % |",
                  "|---|" + "---|" * (len(doms) + 1)]
        for nm in mnames:
            lines.append(f"| {nm} | " + " | ".join(_pct([mer[s][nm][f"greedy_acc/{d}"] for s in mseeds]) for d in doms)
                         + f" | {_pct([mer[s][nm]['greedy_acc'] for s in mseeds])} |")
        lines.append("")
    return lines


def _settings(cfg: SARExpConfig, seeds, ret_n, ret_samples, merge_n, expert_steps) -> str:
    return (f"Settings: {len(seeds)} seed(s) {list(seeds)}; SAR delta ranks (absolute: the toy matrices have "
            f"min(m, n) = 80-160, so the official 1% would be rank 1) {cfg.delta_ranks}, full base rank, "
            f"full mask, fp32 core; retention/exploration evaluated on {ret_n} problems per domain with "
            f"{ret_samples} samples each (pass@k unbiased estimator); merging: experts GRPO'd for {expert_steps} "
            f"steps on one domain from the weak model, SAR merge rank {cfg.merge_rank}, TIES/DARE density "
            f"{cfg.merge_density}, greedy accuracy on {merge_n} problems per domain.")


def study(cfg: SARExpConfig, out: Path, weak: str, rl: dict[int, str], ret_n: int, ret_samples: int,
          merge_n: int, expert_steps: int, merge_seeds: list[int]) -> tuple[dict, dict]:

    ret, mer = {}, {}
    for seed, path in rl.items():
        ret[seed] = retention(out / f"retention_seed{seed}", weak, path, cfg.delta_ranks, cfg.tasks, ret_n,
                              ret_samples, cfg.threads, cfg.progress)
    for seed in merge_seeds:
        experts = {d: rl_checkpoint(out / "experts" / f"{d}_seed{seed}", weak, [d], seed, expert_steps,
                                    cfg.rl_prompts, cfg.rl_group, cfg.rl_lr, max(expert_steps, 1), min(cfg.eval_n, 50),
                                    cfg.threads, cfg.progress) for d in cfg.tasks}
        mer[seed] = merging(out / f"merge_seed{seed}", weak, experts, cfg.merge_rank, cfg.merge_density, cfg.tasks,
                            merge_n, cfg.threads, seed, cfg.progress)
    return ret, mer


def run_experiment(config_path: str | None, overrides: list[str] | None) -> dict:

    cfg = load_config(SARExpConfig, config_path, overrides)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    world_dir = Path(cfg.reuse) / "world" if cfg.reuse and (Path(cfg.reuse) / "world").exists() else out / "world"
    info = build_world(WorldConfig(out=str(world_dir), tasks=list(cfg.tasks), weak_steps=cfg.weak_steps,
                                   strong_steps=cfg.strong_steps, eval_n=cfg.eval_n, threads=cfg.threads,
                                   progress=cfg.progress))
    weak = info["models"]["weak"]["path"]
    rl = {}
    for s in cfg.seeds:
        reuse = Path(cfg.reuse) / "grpo_weak" / f"seed{s}" if cfg.reuse else None
        if reuse is not None and (reuse / "DONE").exists():
            rl[s] = str(reuse / "final")
        else:
            rl[s] = rl_checkpoint(out / "grpo_weak" / f"seed{s}", weak, cfg.tasks, s, cfg.rl_steps, cfg.rl_prompts,
                                  cfg.rl_group, cfg.rl_lr, 20, cfg.eval_n, cfg.threads, cfg.progress)
    ret, mer = study(cfg, out, weak, rl, cfg.eval_n, cfg.eval_samples, cfg.eval_n, cfg.expert_steps, list(cfg.seeds))
    lines = report(out, ret, mer, "# SAR: spectral rewiring of RL updates",
                   _settings(cfg, cfg.seeds, cfg.eval_n, cfg.eval_samples, cfg.eval_n, cfg.expert_steps), out)
    results = {"config": to_dict(cfg), "retention": ret, "merging": mer, "total_seconds": time.time() - t0}
    atomic_write_json(out / "results.json", results)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return {"report": str(out / "report.md"), "results": str(out / "results.json"),
            "total_seconds": round(time.time() - t0, 1)}


DEMO = {"quick": dict(delta_ranks=["1", "4"], expert_steps=2, ret_n=None, ret_samples=None, merge_n=None),
        "full": dict(delta_ranks=["2", "8", "32"], expert_steps=40, ret_n=50, ret_samples=16, merge_n=100)}


def demo_stage(ctx: dict) -> dict:
    """The demo's stage 4: one seed; retention/exploration on the weak model's GRPO run, two short experts."""
    dcfg = ctx["cfg"]
    preset = DEMO[ctx.get("preset", "full")]
    seed = dcfg.seeds[0]
    cfg = SARExpConfig(out=str(ctx["out"] / "sar"), tasks=list(dcfg.tasks), seeds=[seed],
                       delta_ranks=list(preset["delta_ranks"]), rl_prompts=dcfg.rl_prompts, rl_group=dcfg.rl_group,
                       rl_lr=dcfg.rl_lr, expert_steps=preset["expert_steps"], eval_n=dcfg.eval_n,
                       eval_samples=dcfg.eval_samples, threads=dcfg.threads, progress=dcfg.progress)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    ret_n = min(preset["ret_n"] or dcfg.eval_n, dcfg.eval_n)
    ret_samples = min(preset["ret_samples"] or dcfg.eval_samples, dcfg.eval_samples)
    merge_n = min(preset["merge_n"] or dcfg.eval_n, dcfg.eval_n)
    ret, mer = study(cfg, out, ctx["weak"], {seed: ctx["weak_rl"][seed]}, ret_n, ret_samples, merge_n,
                     cfg.expert_steps, [seed])
    settings = _settings(cfg, [seed], ret_n, ret_samples, merge_n, cfg.expert_steps) + (
        f" Demo preset {ctx.get('preset', 'full')}: one seed, few ranks, small evaluations; "
        "`shiftkit experiment sar` runs 3 seeds at the full evaluation size (docs/sar.md).")
    lines = report(out, ret, mer, "## 4. SAR: spectral rewiring of RL updates", settings, Path(ctx["out"]))
    return {"retention": ret, "merging": mer, "seconds": round(time.time() - t0, 1), "report": lines}
