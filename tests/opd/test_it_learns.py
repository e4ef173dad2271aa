"""Direct-OPD moves a toy student along its teacher pair's shift, in the pair's direction.

The pair: the weak spec SFT'd on 2-digit addition traces that drop the final carry half the time
(``ref``), and the same model after more fine-tuning on correct traces (``teacher``): a shift that is
mostly "carry the last column". The student is ``ref`` itself (self-transfer, where the student's
states are on the pair's distribution).

What is measured: the **carry preference** of a model, the mean over held-out carry-sensitive
problems of ``log pi(correct trace) - log pi(carry-dropping trace)`` (nats, scored by teacher
forcing). It is a continuous read-out of exactly the behaviour the pair's shift encodes, so its
run-to-run noise is far smaller than that of greedy accuracy on ~100 problems (the old version of
this test asserted +0.04 greedy accuracy and failed on another CPU: 0.155 -> 0.188).

Control: the same run with the pair swapped (``teacher=ref, teacher_ref=teacher``), i.e. the
reversed shift, on the same prompts and seeds. Direct-OPD must move the preference up with the pair
and down with the swapped pair. A broken signal (zero, sign-flipped, teacher ignored) fails this.

Spread, measured with ``python scripts/learning_test_spread.py opd`` (3 seeds x threads 1 and 2,
results in ``benchmarks/results/learning_test_spread.json``); the margins are next to the constants
below. Mutants checked: the OPD advantage set to zero, and sign-flipped, both fail this test.
"""

import random

import pytest

from shiftkit.evaluate import evaluate_model
from shiftkit.models import load_model_and_tokenizer
from shiftkit.opd.loop import OPDConfig, run_opd
from shiftkit.sampling import score_texts
from shiftkit.sft import SFTConfig, run_sft
from shiftkit.tasks import eval_set, get_task

TASK = "add:2"
# Asserted margins, in nats of carry preference. Measured over 3 seeds x 2 thread counts (see
# benchmarks/results/learning_test_spread.json, key "opd"): forward gain 1.96-3.10 (std 0.47),
# reverse drop 1.22-2.13 (std 0.36), contrast fwd - rev 3.41-5.23 (mean 4.2, std 0.6), teacher - ref
# 8.7-12.2. Greedy accuracy on the same runs moved between -0.12 and +0.06: it is noise at this
# scale, so it is printed, not asserted. The zero-advantage and sign-flipped mutants give a contrast
# of about 0 and below 0.
MIN_CONTRAST = 1.5  # fwd - rev: 4.5 std below the measured mean, 1.9 nats below the smallest run
MIN_EACH_WAY = 0.5  # each direction alone: 4 std below its median, under half the smallest run
MIN_PAIR_SHIFT = 4.0


def carry_preference(path, problems, task) -> float:
    """Mean ``log pi(correct) - log pi(dropped carry)`` over ``problems`` (teacher-forced, nats)."""
    m, tok = load_model_and_tokenizer(path)
    prompts = [p.prompt for p in problems]
    right = [task.trace(p) for p in problems]
    wrong = [task.trace(p, rng=random.Random(0), error_rate=1.0) for p in problems]  # always drops
    lp_r, _ = score_texts(m, tok, prompts, right)
    lp_w, _ = score_texts(m, tok, prompts, wrong)
    return float((lp_r.sum(-1) - lp_w.sum(-1)).mean())


def greedy_acc(path, problems, task) -> float:
    m, tok = load_model_and_tokenizer(path)
    return evaluate_model(m, tok, problems, task.reward, max_new_tokens=24)["greedy_acc"]


def pipeline(tmp_path, seed: int = 0, threads: int = 1, opd_steps: int = 40) -> dict:
    """Build the pair, run Direct-OPD with the pair and with the swapped pair; return read-outs."""
    common = dict(tasks=[TASK], progress=False, threads=threads, seed=seed)
    ref = run_sft(SFTConfig(init="weak", out=str(tmp_path / "ref"), steps=300, lr=1e-2, warmup=10,
                            error_rate=0.5, **common))["out"]
    teacher = run_sft(SFTConfig(model=ref, out=str(tmp_path / "teacher"), steps=100, lr=3e-3, warmup=0,
                                schedule="constant", error_rate=0.0, **common))["out"]
    opd = dict(student=ref, steps=opd_steps, prompts_per_step=8, samples_per_prompt=4, max_new_tokens=24, lr=3e-4,
               reward_mode="full_vocab", eval_every=0, **common)
    fwd = run_opd(OPDConfig(teacher=teacher, teacher_ref=ref, out=str(tmp_path / "fwd"), **opd))["out"]
    rev = run_opd(OPDConfig(teacher=ref, teacher_ref=teacher, out=str(tmp_path / "rev"), **opd))["out"]
    task = get_task(TASK)
    problems = [p for p in eval_set([TASK], 400) if task.trace_would_err(p)]
    paths = {"ref": ref, "teacher": teacher, "fwd": fwd, "rev": rev}
    out = {f"pref/{k}": carry_preference(v, problems, task) for k, v in paths.items()}
    out.update({f"acc/{k}": greedy_acc(v, problems, task) for k, v in paths.items()})
    return out


@pytest.mark.slow
def test_direct_opd_moves_the_student_along_the_pair_shift(tmp_path):
    r = pipeline(tmp_path)
    print({k: round(v, 3) for k, v in r.items()})
    assert r["pref/teacher"] > r["pref/ref"] + MIN_PAIR_SHIFT, "the pair must carry a shift to transfer"
    assert r["pref/fwd"] - r["pref/rev"] > MIN_CONTRAST, r
    assert r["pref/fwd"] > r["pref/ref"] + MIN_EACH_WAY, r
    assert r["pref/rev"] < r["pref/ref"] - MIN_EACH_WAY, r
