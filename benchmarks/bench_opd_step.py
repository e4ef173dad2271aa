"""Time per Direct-OPD step, its phase breakdown, and TRL's on-policy distillation step, side by side.

Toy sizes: student = STRONG_SPEC Qwen3, teacher and reference = WEAK_SPEC (sizes in the results JSON), char
tokenizer, fresh random weights (so every completion runs the full ``--max-new-tokens``: both
trainers do the same amount of generation). Same batch (``--prompts`` prompts x 1 completion),
same max completion length, temperature 1, one optimizer step per batch.

* shiftkit: ``run_opd`` (``student_topk``, K=16, fp32 scorers, adaptive k3 KL to the student's start);
  phases from ``metrics.jsonl`` (sample, student forward, teacher scoring, reference scoring, KL
  anchor scoring, update). Direct-OPD scores with **two** frozen models plus the KL anchor.
* TRL 1.16.0: ``DistillationTrainer`` (the stable successor of ``GKDTrainer``; fully on-policy like
  ``GKDTrainer(lmbda=1)``), ``beta=1`` (reverse KL over the full vocabulary), one teacher.

Each repeat runs both for ``--steps`` steps, alternating which goes first; the first step of every
run is a warm-up and is dropped; we report min/median/max and the ratio of medians.

    .venv/bin/pip install trl==1.16.0
    nice .venv/bin/python benchmarks/bench_opd_step.py --repeats 3 --steps 6
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiftkit.io import atomic_write_json, read_jsonl  # noqa: E402
from shiftkit.models import (STRONG_SPEC, WEAK_SPEC, make_char_tokenizer, make_tiny_model, num_params,  # noqa: E402
                             save_model)
from shiftkit.tasks import Mixture  # noqa: E402

PHASES = ("time/sample", "time/student_forward", "time/teacher_score", "time/ref_score", "time/anchor_score",
          "time/update")


def shiftkit_steps(paths: dict, steps: int, prompts: int, max_new: int, seed: int, threads: int) -> list[dict]:
    from shiftkit.opd.loop import OPDConfig, run_opd

    with tempfile.TemporaryDirectory() as d:
        run_opd(OPDConfig(student=paths["student"], teacher=paths["teacher"], teacher_ref=paths["ref"], out=f"{d}/r",
                          tasks=["add", "mul"], steps=steps, prompts_per_step=prompts, samples_per_prompt=1,
                          max_new_tokens=max_new, lr=1e-5, seed=seed, eval_every=0, progress=False, threads=threads,
                          guard_patience=0))
        return [r for r in read_jsonl(f"{d}/r/metrics.jsonl") if "step_time" in r]


def trl_steps(paths: dict, steps: int, prompts: int, max_new: int, seed: int, threads: int) -> list[float]:
    import transformers
    from datasets import Dataset
    from trl import DistillationConfig, DistillationTrainer

    from shiftkit.models import load_model_and_tokenizer

    student, tok = load_model_and_tokenizer(paths["student"])
    teacher, _ = load_model_and_tokenizer(paths["teacher"])
    mix = Mixture(["add", "mul"])
    rng = random.Random(seed)
    ds = Dataset.from_list([{"prompt": mix.sample(rng, "train").prompt} for _ in range(prompts * (steps + 1))])
    times: list[float] = []

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    with tempfile.TemporaryDirectory() as d:
        cfg = DistillationConfig(output_dir=d, use_cpu=True, per_device_train_batch_size=prompts,
                                 max_completion_length=max_new, temperature=1.0, top_p=1.0, beta=1.0,
                                 learning_rate=1e-5, max_steps=steps, logging_steps=10**6, save_strategy="no",
                                 report_to=[], seed=seed, disable_tqdm=True, dataloader_num_workers=0)
        tr = DistillationTrainer(model=student, teacher_model=teacher, args=cfg, train_dataset=ds,
                                 processing_class=tok, callbacks=[Timer()])
        torch.set_num_threads(threads)
        tr.train()
    return times


def summarize(xs: list[float]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-trl", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/opd_step.json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tmp = tempfile.TemporaryDirectory()
    tok = make_char_tokenizer()
    paths, params = {}, {}
    for name, spec, seed in (("student", STRONG_SPEC, 0), ("teacher", WEAK_SPEC, 1), ("ref", WEAK_SPEC, 2)):
        paths[name] = f"{tmp.name}/{name}"
        m = make_tiny_model(spec, len(tok), seed=seed)
        params[name] = num_params(m)
        save_model(m, tok, paths[name])
    ours: list[dict] = []
    theirs: list[float] = []
    for r in range(a.repeats):
        order = [("shiftkit", shiftkit_steps, ours)] + ([] if a.no_trl else [("trl", trl_steps, theirs)])
        if r % 2:
            order.reverse()
        for name, fn, acc in order:
            t = fn(paths, a.steps, a.prompts, a.max_new_tokens, r, a.threads)
            acc += t[1:]  # drop the warm-up step
            med = statistics.median([x["step_time"] if isinstance(x, dict) else x for x in t[1:]])
            print(f"repeat {r} {name}: median step {med:.3f} s", flush=True)
    step = [x["step_time"] for x in ours]
    phases = {p.split("/")[1]: summarize([x[p] for x in ours]) for p in PHASES}
    share = [(x["time/teacher_score"] + x["time/ref_score"]) / x["step_time"] for x in ours]
    share_anchor = [(x["time/teacher_score"] + x["time/ref_score"] + x["time/anchor_score"]) / x["step_time"]
                    for x in ours]
    res = {
        "what": "seconds per on-policy distillation step (sample + score + loss + backward + optimizer step)",
        "models": {"student": f"STRONG_SPEC Qwen3, {params['student']:,} params (random init)",
                   "teacher/ref": f"WEAK_SPEC Qwen3, {params['teacher']:,} params (random init)"},
        "batch": {"prompts": a.prompts, "completions_per_prompt": 1, "max_new_tokens": a.max_new_tokens},
        "threads": a.threads, "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "load_avg_at_end": os.getloadavg(),
        "shiftkit_direct_opd": summarize(step), "phases": phases,
        "teacher_ref_scoring_share": summarize(share), "teacher_ref_anchor_scoring_share": summarize(share_anchor),
        "command": "python benchmarks/bench_opd_step.py " + " ".join(sys.argv[1:]),
    }
    if theirs:
        import trl

        res["trl_distillation_trainer_reverse_kl"] = summarize(theirs)
        res["trl_version"] = trl.__version__
        res["ratio_trl_over_shiftkit_median"] = statistics.median(theirs) / statistics.median(step)
    atomic_write_json(a.out, res)
    print(json.dumps({k: v for k, v in res.items() if k not in ("phases",)}, indent=1))


if __name__ == "__main__":
    main()
