"""Shared pieces of the suite's "it learns" tests (imported by the tests and by
``scripts/learning_test_spread.py``, so what is measured for the margins is what is asserted).

Read-outs are continuous, teacher-forced log-probabilities on held-out carry-sensitive problems, so
their run-to-run noise is far smaller than that of greedy accuracy on ~100 problems:
* the **carry preference**, mean ``log pi(correct trace) - log pi(carry-dropping trace)`` (nats):
  exactly the behaviour a carry-fixing teacher pair encodes (Direct-OPD's test);
* the **correct-trace log-prob**, mean ``log pi(correct trace)``: what an exact-answer reward pays
  for (GRPO's test; with an inverted reward the policy must move it down).
"""

from __future__ import annotations

import random
from unittest import mock

from shiftkit.evaluate import evaluate_model
from shiftkit.models import load_model_and_tokenizer
from shiftkit.sampling import score_texts
from shiftkit.sft import SFTConfig, run_sft
from shiftkit.tasks import eval_set, get_task

TASK = "add:2"


def carry_problems(n: int = 400):
    task = get_task(TASK)
    return task, [p for p in eval_set([TASK], n) if task.trace_would_err(p)]


def carry_preference(path, problems, task) -> float:
    """Mean ``log pi(correct) - log pi(dropped carry)`` over ``problems`` (teacher-forced, nats)."""
    m, tok = load_model_and_tokenizer(path)
    prompts = [p.prompt for p in problems]
    right = [task.trace(p) for p in problems]
    wrong = [task.trace(p, rng=random.Random(0), error_rate=1.0) for p in problems]  # always drops
    lp_r, _ = score_texts(m, tok, prompts, right)
    lp_w, _ = score_texts(m, tok, prompts, wrong)
    return float((lp_r.sum(-1) - lp_w.sum(-1)).mean())


def correct_logprob(path, problems, task) -> float:
    """Mean teacher-forced ``log pi(correct trace)`` over ``problems`` (nats per completion)."""
    m, tok = load_model_and_tokenizer(path)
    lp, _ = score_texts(m, tok, [p.prompt for p in problems], [task.trace(p) for p in problems])
    return float(lp.sum(-1).mean())


def greedy_acc(path, problems, task) -> float:
    m, tok = load_model_and_tokenizer(path)
    return evaluate_model(m, tok, problems, task.reward, max_new_tokens=24)["greedy_acc"]


def readouts(paths: dict) -> dict:
    task, problems = carry_problems()
    out = {f"pref/{k}": carry_preference(v, problems, task) for k, v in paths.items()}
    out.update({f"lp_correct/{k}": correct_logprob(v, problems, task) for k, v in paths.items()})
    out.update({f"acc/{k}": greedy_acc(v, problems, task) for k, v in paths.items()})
    return out


def sft_ref(tmp_path, seed: int, threads: int) -> str:
    """The weak spec SFT'd on 2-digit traces that drop the final carry half the time."""
    return run_sft(SFTConfig(init="weak", out=str(tmp_path / "ref"), tasks=[TASK], steps=300, lr=1e-2, warmup=10,
                             error_rate=0.5, progress=False, threads=threads, seed=seed))["out"]


def opd_pipeline(tmp_path, seed: int = 0, threads: int = 1, opd_steps: int = 40) -> dict:
    """Build a pair (ref, ref + SFT on correct traces), run Direct-OPD with the pair and swapped."""
    from shiftkit.opd.loop import OPDConfig, run_opd

    common = dict(tasks=[TASK], progress=False, threads=threads, seed=seed)
    ref = sft_ref(tmp_path, seed, threads)
    teacher = run_sft(SFTConfig(model=ref, out=str(tmp_path / "teacher"), steps=100, lr=3e-3, warmup=0,
                                schedule="constant", error_rate=0.0, **common))["out"]
    opd = dict(student=ref, steps=opd_steps, prompts_per_step=8, samples_per_prompt=4, max_new_tokens=24, lr=3e-4,
               reward_mode="full_vocab", eval_every=0, **common)
    fwd = run_opd(OPDConfig(teacher=teacher, teacher_ref=ref, out=str(tmp_path / "fwd"), **opd))["out"]
    rev = run_opd(OPDConfig(teacher=ref, teacher_ref=teacher, out=str(tmp_path / "rev"), **opd))["out"]
    return readouts({"ref": ref, "teacher": teacher, "fwd": fwd, "rev": rev})


def grpo_pipeline(tmp_path, seed: int = 0, threads: int = 1, steps: int = 30) -> dict:
    """GRPO from ``ref`` with the task's reward, and (control) with the reward inverted."""
    from shiftkit.rl import GRPOConfig, run_grpo
    from shiftkit.tasks.arith import ArithTask

    ref = sft_ref(tmp_path, seed, threads)
    rl = dict(model=ref, tasks=[TASK], steps=steps, prompts_per_step=8, group_size=8, max_new_tokens=24, lr=6e-5,
              eval_every=0, progress=False, threads=threads, seed=seed)
    fwd = run_grpo(GRPOConfig(out=str(tmp_path / "fwd"), **rl))["out"]
    right = ArithTask.reward
    with mock.patch.object(ArithTask, "reward", lambda self, p, c: 1.0 - right(self, p, c)):
        rev = run_grpo(GRPOConfig(out=str(tmp_path / "rev"), **rl))["out"]
    return readouts({"ref": ref, "fwd": fwd, "rev": rev})
