"""Time per on-policy distillation step: shiftkit (Direct-OPD and a one-teacher reverse-KL OPD) vs TRL's
DistillationTrainer at matched settings (and TRL's defaults), side by side in one run.

Toy sizes: student = STRONG_SPEC Qwen3, teacher and reference = WEAK_SPEC (sizes in the results JSON), char
tokenizer, fresh random weights (so every completion runs the full ``--max-new-tokens``: all sides do the
same amount of generation). Same batch (``--prompts`` prompts x 1 completion), same max completion length,
temperature 1, top-p 1, one optimizer step per batch, grad-norm clip 1.0, fp32, no gradient checkpointing,
same threads (``--threads``, default 1) and ``OMP_WAIT_POLICY=PASSIVE`` (the script re-executes itself with both).

Sides (each repeat runs all, rotating the order):

* ``shiftkit_full_vocab``: **the same objective as TRL's side**: ``run_opd(reward_mode=full_vocab,
  kl_mode=none)`` with the student's own starting checkpoint as ``teacher_ref``. Its loss, the full-vocabulary
  Direct-OPD surrogate with ``Delta = log p_teacher - log p_ref``, is with the student as the reference
  exactly TRL's ``beta=1`` full-vocabulary reverse KL, in value and gradient
  (``tests/opd/test_full_vocab_is_trl_reverse_kl.py``); here the reference stays at the start, so after the
  first step it differs from the student by the few updates (lr 1e-5). It does one more frozen forward than
  TRL (the reference, student-sized), timed as ``ref_score``; ``ratio_without_ref_forward`` removes it.
  ``ratio`` is computed against this side. (Earlier runs timed ``method=vanilla_opd`` here: the reverse KL
  at the sampled token only, another objective.)
* ``shiftkit_direct_opd``: ``run_opd`` defaults (``student_topk`` K=16, adaptive k3 KL anchor, the real
  pre-RL reference): Direct-OPD itself, whose cost over the same-objective side is reported separately
  (``direct_opd_cost``).
* ``trl_matched``: TRL ``DistillationTrainer`` (the stable successor of ``GKDTrainer``; fully on-policy
  like ``GKDTrainer(lmbda=1)``), ``beta=1`` (reverse KL over the full vocabulary), one teacher,
  ``bf16=False, gradient_checkpointing=False``.
* ``trl_defaults``: the same with TRL's defaults for those two knobs (``bf16=True`` -> CPU bf16 autocast,
  ``gradient_checkpointing=True``); labelled, not a matched comparison.

Phases. shiftkit: ``metrics.jsonl`` (generation = ``time/sample``; scoring = teacher + reference + anchor
scoring; update = student forward + loss/backward/optimizer; other = step - those). TRL: by wrapping the
trainer's methods on the instance: generation = ``_generate``; scoring = the teacher's backbone forward
(``_get_last_hidden_state`` called with the teacher) + the rest of ``_generate_and_score_completions``;
update = step (callback) - generation - scoring (student forward, chunked head projection + divergence for
both models, backward, optimizer). Tokens/s = completion tokens per step / seconds. The first step of every
run is a warm-up and is dropped.

    .venv/bin/python -m pip install -q 'trl==1.16.0'
    .venv/bin/python benchmarks/bench_opd_step.py --repeats 3 --steps 5 --no-trl-defaults
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import load_avg, provenance, single_thread, spread  # noqa: E402
from shiftkit.io import atomic_write_json, read_jsonl  # noqa: E402
from shiftkit.models import (STRONG_SPEC, WEAK_SPEC, make_char_tokenizer, make_tiny_model, num_params,  # noqa: E402
                             save_model)
from shiftkit.tasks import Mixture  # noqa: E402

PHASES = ("generation", "scoring", "update", "other", "step")


def shiftkit_steps(paths: dict, steps: int, prompts: int, max_new: int, seed: int, threads: int,
                   variant: str) -> list[dict]:
    from shiftkit.opd.loop import OPDConfig, run_opd

    ref = paths["ref"] if variant == "direct" else paths["student"]
    extra = {} if variant == "direct" else {"reward_mode": "full_vocab", "kl_mode": "none"}
    with tempfile.TemporaryDirectory() as d:
        run_opd(OPDConfig(student=paths["student"], teacher=paths["teacher"], teacher_ref=ref, out=f"{d}/r",
                          tasks=["add", "mul"], steps=steps, prompts_per_step=prompts, samples_per_prompt=1,
                          max_new_tokens=max_new, lr=1e-5, seed=seed, eval_every=0, progress=False, threads=threads,
                          guard_patience=0, **extra))
        rows = [r for r in read_jsonl(f"{d}/r/metrics.jsonl") if "step_time" in r]
    out = []
    for r in rows:
        gen = r["time/sample"]
        sc = r["time/teacher_score"] + r["time/ref_score"] + r["time/anchor_score"]
        up = r["time/student_forward"] + r["time/update"]
        out.append({"generation": gen, "scoring": sc, "update": up, "other": r["step_time"] - gen - sc - up,
                    "step": r["step_time"], "completion_tokens": r["response_len"] * prompts,
                    "teacher_ref_share": (r["time/teacher_score"] + r["time/ref_score"]) / r["step_time"],
                    "ref_score": r["time/ref_score"],
                    "threads": torch.get_num_threads()})
    return out


def trl_steps(paths: dict, steps: int, prompts: int, max_new: int, seed: int, threads: int,
              defaults: bool) -> list[dict]:
    import transformers
    from datasets import Dataset
    from trl import DistillationConfig, DistillationTrainer

    from shiftkit.models import load_model_and_tokenizer

    student, tok = load_model_and_tokenizer(paths["student"])
    teacher, _ = load_model_and_tokenizer(paths["teacher"])
    mix = Mixture(["add", "mul"])
    rng = random.Random(seed)
    ds = Dataset.from_list([{"prompt": mix.sample(rng, "train").prompt} for _ in range(prompts * (steps + 1))])
    rows: list[dict] = []
    acc = {"gen": 0.0, "gen_score": 0.0, "teacher": 0.0}
    box: list = []

    def timed(fn, key, only_model=None):
        def wrapper(*a, **kw):
            s = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                if only_model is None or (a and a[0] is only_model):
                    acc[key] += time.perf_counter() - s
        return wrapper

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            for k in acc:
                acc[k] = 0.0
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            step = time.perf_counter() - self.t0
            mean_len = box[0]._metrics["train"]["completions/mean_length"][-1]
            sc = acc["gen_score"] - acc["gen"] + acc["teacher"]
            rows.append({"generation": acc["gen"], "scoring": sc, "update": step - acc["gen"] - sc, "other": 0.0,
                         "step": step, "completion_tokens": mean_len * prompts, "threads": torch.get_num_threads()})

    knobs = {} if defaults else {"bf16": False, "gradient_checkpointing": False}
    with tempfile.TemporaryDirectory() as d:
        cfg = DistillationConfig(output_dir=d, use_cpu=True, per_device_train_batch_size=prompts,
                                 max_completion_length=max_new, temperature=1.0, top_p=1.0, beta=1.0,
                                 learning_rate=1e-5, max_grad_norm=1.0, max_steps=steps, logging_steps=10**6,
                                 save_strategy="no", report_to=[], seed=seed, disable_tqdm=True,
                                 dataloader_num_workers=0, **knobs)
        tr = DistillationTrainer(model=student, teacher_model=teacher, args=cfg, train_dataset=ds,
                                 processing_class=tok, callbacks=[Timer()])
        box.append(tr)
        tr._generate = timed(tr._generate, "gen")
        tr._generate_and_score_completions = timed(tr._generate_and_score_completions, "gen_score")
        tr._get_last_hidden_state = timed(tr._get_last_hidden_state, "teacher",
                                          only_model=tr.accelerator.unwrap_model(tr.teacher_model))
        torch.set_num_threads(threads)
        tr.train()
    return rows


def trl_settings(defaults: bool) -> dict:
    from trl import DistillationConfig

    c = DistillationConfig(output_dir=tempfile.gettempdir(), use_cpu=True,
                           **({} if defaults else {"bf16": False, "gradient_checkpointing": False}))
    return {"bf16": c.bf16, "gradient_checkpointing": c.gradient_checkpointing, "beta": c.beta,
            "optim": str(c.optim)}


summarize = spread


def side_summary(rows: list[dict]) -> dict:
    out = {p: summarize([r[p] for r in rows]) for p in PHASES}
    out["completion_tokens_per_step"] = summarize([r["completion_tokens"] for r in rows])
    out["tokens_per_s_step"] = summarize([r["completion_tokens"] / r["step"] for r in rows])
    out["tokens_per_s_generation"] = summarize([r["completion_tokens"] / r["generation"] for r in rows])
    if "teacher_ref_share" in rows[0]:
        out["teacher_ref_scoring_share"] = summarize([r["teacher_ref_share"] for r in rows])
        out["ref_score"] = summarize([r["ref_score"] for r in rows])
        out["step_without_ref_forward"] = summarize([r["step"] - r["ref_score"] for r in rows])
    out["threads_seen"] = sorted({r["threads"] for r in rows})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-trl", action="store_true")
    ap.add_argument("--no-trl-defaults", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/opd_step.json")
    a = ap.parse_args()
    single_thread(a.threads)
    tmp = tempfile.TemporaryDirectory()
    tok = make_char_tokenizer()
    paths, params = {}, {}
    for name, spec, seed in (("student", STRONG_SPEC, 0), ("teacher", WEAK_SPEC, 1), ("ref", WEAK_SPEC, 2)):
        paths[name] = f"{tmp.name}/{name}"
        m = make_tiny_model(spec, len(tok), seed=seed)
        params[name] = num_params(m)
        save_model(m, tok, paths[name])
    args = (paths, a.steps, a.prompts, a.max_new_tokens)
    sides = {"shiftkit_full_vocab": lambda r: shiftkit_steps(*args, r, a.threads, "full_vocab"),
             "shiftkit_direct_opd": lambda r: shiftkit_steps(*args, r, a.threads, "direct")}
    if not a.no_trl:
        sides["trl_matched"] = lambda r: trl_steps(*args, r, a.threads, defaults=False)
        if not a.no_trl_defaults:
            sides["trl_defaults"] = lambda r: trl_steps(*args, r, a.threads, defaults=True)
    got: dict[str, list[dict]] = {k: [] for k in sides}
    names = list(sides)
    loads = [load_avg()]
    for r in range(a.repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            t = sides[name](r)
            got[name] += t[1:]  # drop the warm-up step
            print(f"repeat {r} {name}: median step {statistics.median(x['step'] for x in t[1:]):.3f} s", flush=True)
        loads.append(load_avg())
    med = {k: statistics.median(x["step"] for x in v) for k, v in got.items()}
    res = {
        "what": "seconds per on-policy distillation step (generation + scoring + update)",
        **provenance(),
        "models": {"student": f"STRONG_SPEC Qwen3, {params['student']:,} params (random init)",
                   "teacher/ref": f"WEAK_SPEC Qwen3, {params['teacher']:,} params (random init)"},
        "matched": {"dtype": "fp32", "gradient_checkpointing": False, "prompts": a.prompts,
                    "completions_per_prompt": 1, "max_new_tokens": a.max_new_tokens, "temperature": 1.0,
                    "top_p": 1.0, "lr": 1e-5, "grad_clip": 1.0, "threads": a.threads, "OMP_WAIT_POLICY": "PASSIVE",
                    "objective": {
                        "shiftkit_full_vocab": "full-vocabulary reverse KL to one teacher, token mean: Direct-OPD "
                                               "reward_mode=full_vocab with the student's starting checkpoint as the "
                                               "reference, kl_mode=none (exactly TRL's loss and gradient while the "
                                               "student is at its start; one extra frozen forward, the reference)",
                        "trl_matched": "full-vocabulary reverse KL to one teacher, token mean: DistillationTrainer beta=1",
                        "shiftkit_direct_opd": "Direct-OPD defaults (student_topk K=16, pre-RL reference, adaptive KL "
                                               "anchor): another objective, reported as its cost over the same-objective "
                                               "side"}},
        "sides": {k: side_summary(v) for k, v in got.items()},
        "load_avg": loads,
        "warmup": "first step of every run dropped", "repeats": a.repeats, "steps_per_run": a.steps,
    }
    if "trl_matched" in med:
        import transformers
        import trl

        res["peer"] = {"name": "trl.DistillationTrainer", "version": trl.__version__,
                       "transformers": transformers.__version__}
        res["matched"]["trl_settings"] = trl_settings(False)
        res["ratio"] = med["trl_matched"] / med["shiftkit_full_vocab"]
        res["ratio_note"] = ("TRL matched median step / shiftkit median step, the same objective (full-vocabulary "
                             "reverse KL to one teacher); > 1 means shiftkit is faster")
        res["ratio_without_ref_forward"] = med["trl_matched"] / statistics.median(
            x["step"] - x["ref_score"] for x in got["shiftkit_full_vocab"])
        res["ratio_without_ref_forward_note"] = ("the same, with shiftkit's reference forward (which the reverse KL "
                                                 "does not need: the reference is the student) subtracted per step")
        res["ratio_direct_opd"] = med["trl_matched"] / med["shiftkit_direct_opd"]
        res["ratio_direct_opd_note"] = ("TRL matched (one teacher) / shiftkit Direct-OPD (teacher + reference + KL "
                                        "anchor): different work per step")
        if "trl_defaults" in med:
            res["trl_defaults"] = {"ratio": med["trl_defaults"] / med["shiftkit_full_vocab"],
                                   "ratio_direct_opd": med["trl_defaults"] / med["shiftkit_direct_opd"],
                                   "settings": trl_settings(True),
                                   "note": "TRL's defaults for bf16 / gradient checkpointing on this CPU (no native "
                                           "bf16); not a matched comparison"}
    res["direct_opd_cost"] = med["shiftkit_direct_opd"] / med["shiftkit_full_vocab"]
    res["direct_opd_cost_note"] = ("shiftkit Direct-OPD median step / shiftkit same-objective (full-vocab reverse "
                                   "KL) median step")
    atomic_write_json(a.out, res)
    print(json.dumps({k: res.get(k) for k in ("ratio", "ratio_without_ref_forward", "ratio_direct_opd",
                                               "direct_opd_cost")} |
                     {k: {p: round(v[p]["median"], 3) for p in PHASES} for k, v in res["sides"].items()}, indent=1))


if __name__ == "__main__":
    main()
