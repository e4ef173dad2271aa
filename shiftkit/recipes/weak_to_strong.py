"""The weak-to-strong experiment (``shiftkit experiment weak-to-strong``) and the demo's OPD stage.

On the toy world: the weak model before RL (reference) and after GRPO (teacher); the strong model
after SFT (student). Every method gets the same number of student steps and rollouts per step:

1. ``direct_opd_topk``: Direct-OPD, ``student_topk`` (K=16, the official default);
2. ``direct_opd_sampled``: Direct-OPD, ``sampled``;
3. ``vanilla_opd``: on-policy distillation toward the weak RL teacher (no KL anchor);
4. ``grpo``: GRPO on the student with the task reward (step- and rollout-matched);
5. ``composition``: two Direct-OPD stages, the addition-only RL shift then the multiplication-only
   RL shift (half the steps each), each re-anchoring the KL to its starting checkpoint.

Held-out greedy accuracy and pass@1/pass@8 (mean +- std over seeds), wall-clock per method, and
learning curves (PNG). Every run is cached in its run directory, so a re-run resumes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from shiftkit.config import load_config, to_dict
from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_write_json
from shiftkit.opd.loop import OPDConfig
from shiftkit.recipes.common import TOY_RL, cached_eval
from shiftkit.recipes.world import WorldConfig

METHODS = ("direct_opd_topk", "direct_opd_sampled", "vanilla_opd", "grpo", "composition")
LABELS = {"direct_opd_topk": "Direct-OPD (student_topk)", "direct_opd_sampled": "Direct-OPD (sampled)",
          "vanilla_opd": "vanilla OPD from weak RL teacher", "grpo": "GRPO on student (step-matched)",
          "composition": "Direct-OPD 2-stage (add-RL then mul-RL shift)"}


@dataclasses.dataclass
class W2SConfig:
    out: str = "runs/weak_to_strong"
    reuse: str = ""  # a demo output dir: reuse its world/ and grpo_weak/seed*/ (same settings -> same runs)
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    weak_steps: int = WorldConfig.weak_steps  # world SFT
    strong_steps: int = WorldConfig.strong_steps
    rl_steps: int = TOY_RL["steps"]  # weak GRPO teachers
    rl_prompts: int = TOY_RL["prompts_per_step"]
    rl_group: int = TOY_RL["group_size"]
    rl_lr: float = TOY_RL["lr"]
    comp_rl_steps: int = TOY_RL["steps"]  # the add-only and mul-only weak GRPO teachers (seed 0, shared by all seeds)
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2])
    methods: list[str] = dataclasses.field(default_factory=lambda: list(METHODS))
    steps: int = 40  # student steps, every method
    prompts_per_step: int = 8
    samples_per_prompt: int = 4
    lr: float = 1e-4
    kl_mode: str = "adaptive"
    top_k: int = 16
    max_new_tokens: int = 48
    eval_every: int = 10
    eval_n: int = 100  # held-out problems per domain
    eval_samples: int = 8  # for pass@k (k <= eval_samples)
    threads: int = 2
    progress: bool = True

    def validate(self) -> None:
        bad = [m for m in self.methods if m not in METHODS]
        if bad:
            raise ShiftkitError(f"weak-to-strong: unknown method '{bad[0]}' (known: {', '.join(METHODS)})")
        if not self.seeds or self.steps < 2:
            raise ShiftkitError("weak-to-strong: needs at least one seed and steps >= 2")


def _eval(path: str, cfg: W2SConfig, cache: Path) -> dict:
    return cached_eval(path, cfg.tasks, cfg.eval_n, cfg.eval_samples, cache, max_new_tokens=cfg.max_new_tokens)


def _opd_cfg(cfg: W2SConfig, out: Path, seed: int, **kw):
    base = dict(out=str(out), tasks=list(cfg.tasks), steps=cfg.steps, prompts_per_step=cfg.prompts_per_step,
                samples_per_prompt=cfg.samples_per_prompt, max_new_tokens=cfg.max_new_tokens, lr=cfg.lr,
                kl_mode=cfg.kl_mode, top_k=cfg.top_k, seed=seed, eval_every=cfg.eval_every, eval_n=cfg.eval_n,
                threads=cfg.threads, progress=cfg.progress)
    base.update(kw)
    return OPDConfig(**base)


def teachers(cfg: W2SConfig, out: Path, weak: str, weak_rl: dict | None = None, reuse: Path | None = None) -> dict:
    """The weak RL teachers: add-only / mul-only (for composition), then add+mul per seed (given, reused
    from a demo directory -- waiting for a run still in progress there -- or trained here)."""
    from shiftkit.recipes.common import rl_checkpoint

    common = dict(prompts_per_step=cfg.rl_prompts, group_size=cfg.rl_group, lr=cfg.rl_lr, eval_every=0,
                  eval_n=cfg.eval_n, threads=cfg.threads, progress=cfg.progress)
    comp = {}
    if "composition" in cfg.methods:
        for dom in cfg.tasks:
            comp[dom] = rl_checkpoint(out / f"grpo_weak_{dom}" / "seed0", weak, [dom], 0, cfg.comp_rl_steps, **common)
    rl = dict(weak_rl or {})
    for s in cfg.seeds:
        if s in rl:
            continue
        if (p := _done_final(out / "grpo_weak" / f"seed{s}")):  # trained here by an earlier run
            rl[s] = p
            continue
        if reuse is not None and (reuse / "grpo_weak" / f"seed{s}").exists():
            t0 = time.time()
            while not (p := _done_final(reuse / "grpo_weak" / f"seed{s}")):
                if time.time() - t0 > 3600:
                    raise ShiftkitError(f"{reuse}/grpo_weak/seed{s} did not finish within an hour")
                time.sleep(10)
            rl[s] = p
            continue
        rl[s] = rl_checkpoint(out / "grpo_weak" / f"seed{s}", weak, cfg.tasks, s, cfg.rl_steps, **common)
    return {"rl": rl, "comp": comp}


def run_methods(cfg: W2SConfig, out: Path, weak: str, strong: str, tch: dict) -> dict:
    """Train every method for every seed; evaluate each final model (cached)."""
    from shiftkit.opd.loop import run_opd

    results: dict = {m: {} for m in cfg.methods}
    for s in cfg.seeds:
        for m in cfg.methods:
            d = out / m / f"seed{s}"
            if m == "direct_opd_topk":
                c = _opd_cfg(cfg, d, s, student=strong, teacher=tch["rl"][s], teacher_ref=weak)
            elif m == "direct_opd_sampled":
                c = _opd_cfg(cfg, d, s, student=strong, teacher=tch["rl"][s], teacher_ref=weak, reward_mode="sampled")
            elif m == "vanilla_opd":
                c = _opd_cfg(cfg, d, s, student=strong, teacher=tch["rl"][s], method="vanilla_opd", kl_mode="none")
            elif m == "grpo":
                c = _opd_cfg(cfg, d, s, student=strong, method="grpo", top_k=OPDConfig.top_k)  # GRPO reads no top_k
            else:
                half = cfg.steps // 2
                stages = [{"teacher": tch["comp"][dom], "teacher_ref": weak, "steps": n}
                          for dom, n in zip(cfg.tasks, (half, cfg.steps - half))]
                c = _opd_cfg(cfg, d, s, student=strong, stages=stages)
            t0 = time.time()
            try:
                summ = run_opd(c)
            except ShiftkitError as e:  # e.g. a GRPO teacher that never updated (no reward signal): no shift
                if "identical weights" not in str(e):
                    raise
                results[m][s] = {"skipped": "the weak RL teacher equals its reference (GRPO made no update)"}
                continue
            wall = summ.get("train_seconds") or (time.time() - t0)
            ev = _eval(summ["out"], cfg, d / "eval_final.json")
            results[m][s] = {"path": summ["out"], "train_seconds": wall, **ev}
    return results


def _curves(out: Path, cfg: W2SConfig) -> dict:
    """Held-out greedy accuracy vs student step, per method (mean over seeds)."""
    from shiftkit.io import read_jsonl

    curves = {}
    for m in cfg.methods:
        per_seed = []
        for s in cfg.seeds:
            d = out / m / f"seed{s}"
            files = sorted(d.glob("stage*/metrics.jsonl")) if m == "composition" else [d / "metrics.jsonl"]
            pts = {}
            for i, f in enumerate(files):
                if not f.exists():
                    continue
                for r in read_jsonl(f):
                    if "eval/greedy_acc" in r:
                        if i > 0 and r["step"] == 0:
                            continue  # a stage's step-0 eval repeats the previous stage's last one
                        x = r.get("global_step", r["step"])  # the updates done (shiftkit.runs)
                        pts[x] = r["eval/greedy_acc"]
            per_seed.append(pts)
        steps = sorted(set.intersection(*[set(p) for p in per_seed])) if per_seed and all(per_seed) else []
        curves[m] = (steps, [float(np.mean([p[x] for p in per_seed])) for x in steps])
    return curves


def _diag_curves(out: Path, cfg: W2SConfig) -> dict:
    from shiftkit.io import read_jsonl

    out_d = {}
    for m in ("direct_opd_topk", "direct_opd_sampled"):
        f = out / m / f"seed{cfg.seeds[0]}" / "metrics.jsonl"
        if m in cfg.methods and f.exists():
            rows = [r for r in read_jsonl(f) if "reward/weighted_mean" in r]
            out_d[m] = rows
    return out_d


def _ms(vals) -> str:
    a = np.asarray([v for v in vals if v is not None], dtype=float)
    if not a.size:
        return "n/a"
    return f"{100 * a.mean():.1f} ± {100 * (a.std(ddof=1) if a.size > 1 else 0.0):.1f}"


def report(cfg: W2SConfig, out: Path, res: dict, base: dict, title: str, settings: str) -> list[str]:
    from shiftkit.plots import line_plot

    rows_src = [("weak SFT (teacher reference)", {0: base["weak"]}), ("strong SFT (student start)", {0: base["strong"]}),
                ("weak GRPO teachers (add+mul)", base["weak_rl"])]
    for dom, ev in base.get("comp", {}).items():
        rows_src.append((f"weak GRPO teacher ({dom} only)", {0: ev}))
    rows_src += [(LABELS[m], res[m]) for m in cfg.methods]
    lines = [title, "", settings, "",
             "| model | seeds | greedy acc % | pass@1 % | pass@8 % | " + " | ".join(f"greedy {d} %" for d in cfg.tasks)
             + " | train wall-clock s |", "|---|---|---|---|---|" + "---|" * len(cfg.tasks) + "---|"]
    for name, per in rows_src:
        skipped = [r["skipped"] for r in per.values() if "skipped" in r]
        if skipped:
            lines.append(f"| {name} | skipped: {skipped[0]} |")
            continue
        v = list(per.values())
        wall = [r["train_seconds"] for r in v if r.get("train_seconds")]
        lines.append(f"| {name} | {len(v)} | {_ms([r.get('greedy_acc') for r in v])} | "
                     f"{_ms([r.get('pass@1') for r in v])} | {_ms([r.get('pass@8') for r in v])} | "
                     + " | ".join(_ms([r.get(f'greedy_acc/{d}') for r in v]) for d in cfg.tasks)
                     + (f" | {np.mean(wall):.0f} |" if wall else " | - |"))
    curves = _curves(out, cfg)
    line_plot(out / "opd_accuracy.png", {LABELS[m]: xy for m, xy in curves.items() if xy[0]},
              "Weak-to-strong: held-out greedy accuracy of the strong student", "student step", "greedy accuracy",
              ylim=(0, 1))
    diag = _diag_curves(out, cfg)
    if diag:
        series = {}
        for m, rows in diag.items():
            series[f"{LABELS[m]}: weighted reward"] = ([r["step"] for r in rows], [r["reward/weighted_mean"] for r in rows])
            series[f"{LABELS[m]}: alpha / 10"] = ([r["step"] for r in rows], [r["kl/alpha"] / 10 for r in rows])
        line_plot(out / "opd_signals.png", series, f"Direct-OPD signals (seed {cfg.seeds[0]})", "student step", "value")
    lines += ["", "![accuracy curves](opd_accuracy.png)" + (" ![signals](opd_signals.png)" if diag else ""), ""]
    lines += claims(cfg, res, base)
    return lines


def verdict(a: list[float], b: list[float], n_problems: int, margin: float = 0.0) -> str:
    """The claim ``mean(a) > mean(b) - margin`` from per-seed values (a list of one value for a fixed model:
    the SFT checkpoints do not vary with the seed; ``None`` for a trained side with one seed).

    ``holds`` / ``does not hold`` only when the difference exceeds both one problem (``1 / n_problems``) and
    twice the larger seed std, and every side that varies with the seed ran at least two seeds; otherwise
    ``not resolved`` (one seed: ``not resolved (1 seed)``; one seed resolves nothing)."""
    if any(x is None for x in (*a, *b)):
        return "not resolved (1 seed)"

    def std(v):
        return float(np.std(v, ddof=1)) if len(v) > 1 else 0.0

    diff = float(np.mean(a)) - float(np.mean(b)) + margin
    gap = max(1.0 / n_problems, 2 * max(std(a), std(b)))
    return "holds" if diff > gap else "does not hold" if -diff > gap else "not resolved"


def claims(cfg: W2SConfig, res: dict, base: dict) -> list[str]:
    """The paper's claims, checked against the measured per-seed greedy accuracies (see :func:`verdict`)."""
    def seeds(per, key="greedy_acc"):  # per-seed values of a trained side; [None] with one seed
        if any("skipped" in r for r in per.values()):
            return None
        v = [r.get(key) for r in per.values() if r.get(key) is not None]
        return None if not v else (v if len(v) > 1 else [None])

    def pct(per):
        v = [r.get("greedy_acc") for r in per.values() if r.get("greedy_acc") is not None]
        return f"{100 * float(np.mean(v)):.1f}%"

    n = cfg.eval_n * len(cfg.tasks)
    s0 = [base["strong"]["greedy_acc"]]  # one checkpoint, the same for every seed
    n_seeds = len(res.get("direct_opd_topk", {}))
    out = [f"Claims of the paper, measured here (mean greedy accuracy over {n_seeds} seed(s); a claim holds or fails "
           f"only when the difference exceeds one problem in {n} and twice the larger seed std, with at least two "
           "seeds on every trained side; else it is not resolved):", ""]
    if "direct_opd_topk" not in res or seeds(res["direct_opd_topk"]) is None or seeds(base["weak_rl"]) is None:
        return out + [""]
    d, t, dp = seeds(res["direct_opd_topk"]), seeds(base["weak_rl"]), pct(res["direct_opd_topk"])
    out.append(f"- Direct-OPD improves the strong student: {100 * s0[0]:.1f}% -> {dp}: **{verdict(d, s0, n)}**.")
    out.append(f"- The student ends above its weak teacher ({pct(base['weak_rl'])}): **{verdict(d, t, n)}**.")
    if "vanilla_opd" in res and seeds(res["vanilla_opd"]) is not None:
        out.append(f"- Direct-OPD beats vanilla OPD from the weak teacher ({pct(res['vanilla_opd'])} vs {dp}): "
                   f"**{verdict(d, seeds(res['vanilla_opd']), n)}**.")
    if "grpo" in res and seeds(res["grpo"]) is not None:
        out.append(f"- Direct-OPD is at least competitive with step-matched GRPO ({pct(res['grpo'])} vs {dp}): "
                   f"**{verdict(d, seeds(res['grpo']), n, margin=0.02)}** (within 2 points counts as competitive).")
    if "composition" in res and seeds(res["composition"]) is not None:
        out.append(f"- Composition (two shifts) adds on top of a single shift ({pct(res['composition'])} vs {dp}): "
                   f"**{verdict(seeds(res['composition']), d, n)}**.")
    return out + [""]


def _base_evals(cfg: W2SConfig, out: Path, weak: str, strong: str, tch: dict) -> dict:
    base = {"weak": _eval(weak, cfg, out / "eval_weak.json"), "strong": _eval(strong, cfg, out / "eval_strong.json"),
            "weak_rl": {s: _eval(p, cfg, out / f"eval_weak_rl_seed{s}.json") for s, p in tch["rl"].items()
                        if s in cfg.seeds},
            "comp": {dom: _eval(p, cfg, out / f"eval_weak_rl_{dom}.json") for dom, p in tch["comp"].items()}}
    return base


def _settings(cfg: W2SConfig) -> str:
    return (f"Student = the strong SFT model, teacher pair = the weak SFT model before/after GRPO. Every method: "
            f"{cfg.steps} student steps x {cfg.prompts_per_step} prompts x {cfg.samples_per_prompt} samples, lr {cfg.lr}, "
            f"AdamW; Direct-OPD: K={cfg.top_k}, fp32 scorers, k3 KL to the student's start, kl_mode={cfg.kl_mode} "
            f"(alpha0 2.5, eps 0.01, [0.5, 2.5]); vanilla OPD without KL; composition: {cfg.steps // 2}+"
            f"{cfg.steps - cfg.steps // 2} steps with the add-only then mul-only weak GRPO shift "
            f"({cfg.comp_rl_steps} GRPO steps each, seed 0). Seeds {cfg.seeds}. Held-out: {cfg.eval_n} test problems "
            f"per domain; pass@k from {cfg.eval_samples} samples at temperature 1.")


def run_experiment(config_path: str | None, overrides: list[str] | None) -> dict:
    from shiftkit.recipes.world import build_world

    cfg = load_config(W2SConfig, config_path, overrides)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if cfg.reuse:  # a demo's world and weak GRPO runs (read only; valid when the settings match the demo's)
        wj = Path(cfg.reuse) / "world" / "world.json"
        if not wj.exists():
            raise ShiftkitError(f"reuse={cfg.reuse}: no world/world.json there (run `shiftkit demo` first)")
        info = json.loads(wj.read_text())
    else:
        info = build_world(WorldConfig(out=str(out / "world"), tasks=list(cfg.tasks), weak_steps=cfg.weak_steps,
                                       strong_steps=cfg.strong_steps, eval_n=cfg.eval_n, threads=cfg.threads,
                                       progress=cfg.progress))
    weak, strong = info["models"]["weak"]["path"], info["models"]["strong"]["path"]
    tch = teachers(cfg, out, weak, reuse=Path(cfg.reuse) if cfg.reuse else None)
    res = run_methods(cfg, out, weak, strong, tch)
    base = _base_evals(cfg, out, weak, strong, tch)
    lines = report(cfg, out, res, base, "# Weak-to-strong transfer (Direct-OPD)", _settings(cfg))
    results = {"config": to_dict(cfg), "base": base, "methods": res, "total_seconds": time.time() - t0}
    atomic_write_json(out / "results.json", results)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return {"report": str(out / "report.md"), "results": str(out / "results.json"),
            "total_seconds": round(time.time() - t0, 1),
            **{f"{m}/greedy_acc": float(np.mean([r["greedy_acc"] for r in res[m].values()]))
               for m in res if all("greedy_acc" in r for r in res[m].values())}}


def _done_final(run_dir: Path) -> str | None:
    return str(run_dir / "final") if (run_dir / "DONE").exists() else None


DEMO = {"quick": dict(steps=2, prompts_per_step=2, samples_per_prompt=2, eval_every=0, comp_rl_steps=2),
        "full": dict(steps=16, prompts_per_step=8, samples_per_prompt=4, eval_every=8, comp_rl_steps=20)}


def demo_stage(ctx: dict) -> dict:
    """The demo's stage 3: all five methods, one seed, fewer steps (see ``DEMO``)."""
    dcfg = ctx["cfg"]
    seed = dcfg.seeds[0]
    cfg = W2SConfig(out=str(ctx["out"] / "opd"), tasks=list(dcfg.tasks), seeds=[seed], eval_n=dcfg.eval_n,
                    eval_samples=min(8, dcfg.eval_samples), threads=dcfg.threads, progress=dcfg.progress,
                    rl_lr=dcfg.rl_lr, rl_prompts=dcfg.rl_prompts, rl_group=dcfg.rl_group, **DEMO[ctx.get("preset", "full")])
    if ctx.get("preset") == "quick":
        cfg.max_new_tokens = 48
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    tch = teachers(cfg, out, ctx["weak"], {seed: ctx["weak_rl"][seed]})
    res = run_methods(cfg, out, ctx["weak"], ctx["strong"], tch)
    base = _base_evals(cfg, out, ctx["weak"], ctx["strong"], tch)
    settings = _settings(cfg) + (f" Demo settings (preset {ctx.get('preset')}): one seed and {cfg.steps} steps to stay "
                                 "within the demo's time; `shiftkit experiment weak-to-strong` runs 3 seeds x 40 steps "
                                 "(see docs/opd.md).")
    lines = report(cfg, out, res, base, "## 3. Weak-to-strong transfer (Direct-OPD)", settings)
    for png in ("opd_accuracy.png", "opd_signals.png"):  # the report lives one directory up
        if (out / png).exists():
            (ctx["out"] / png).write_bytes((out / png).read_bytes())
    return {"methods": res, "base": base, "seconds": round(time.time() - t0, 1), "report": lines}
