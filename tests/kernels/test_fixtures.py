"""The fixture set: every correct solution passes the full protocol (no false positives), every wrong
one fails with the right finding, the degenerate task is refused, and profiling + rewards work end to end."""

import os

import pytest

from shiftkit.kernels import EvalConfig, Result, evaluate, load_problem, load_solution
from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

pytestmark = pytest.mark.usefixtures("torch_binding_build")

CORRECT = [
    ("fused_bias_relu_residual", "correct.py"),
    ("scale_shift_clamp", "correct.py"),
    ("row_softmax", "correct.py"),
    ("layernorm_gelu", "workspace"),
    ("rowsum_scale", "correct.py"),
    ("kb_l1_19_ReLU", "correct.py"),
    ("kb_l1_47_Sum_reduction_over_a_dimension", "correct.py"),
    ("kb_l1_94_MSELoss", "correct.py"),
    ("kb_l1_100_HingeLoss", "correct.py"),
    ("kb_l1_1_Square_matrix_multiplication", "correct.py"),
]
WRONG = [
    ("kb_l1_19_ReLU", "wrong_off_by_one.py", "output_mismatch", 1),
    ("kb_l1_47_Sum_reduction_over_a_dimension", "wrong_axis.py", "output_mismatch", 1),
    # a shared scratch row behind a barrier: wrong whenever two threads run, on the first round
    ("row_softmax", "wrong_race.py", "output_mismatch", 2),
]


def _ev(problem, sol, **over):
    return evaluate(load_problem(PROBLEMS / f"{problem}.py"), load_solution(SOLUTIONS / problem / sol),
                    EvalConfig(profile=False, **over))


def test_fixture_set_size():
    assert len({p for p, _ in CORRECT}) >= 10
    assert sum(1 for p, _ in CORRECT if p.startswith("kb_")) >= 5


@pytest.mark.parametrize("problem,sol", CORRECT, ids=[p for p, _ in CORRECT])
def test_correct_fixture_passes(problem, sol):
    r = _ev(problem, sol)
    assert r.compiled and r.correct, (r.codes(None), r.reason)
    assert r.reward == 1.0 and r.codes() == [] and "not profiled" in r.reason
    # absolute, over every round: the shift round (x + 32 rms) puts the 362-long matmul's outputs near 4e5, where a
    # correct fp32 kernel differs by ~0.1 (3e-7 relative); the scale-aware budget is what `correct` checks
    assert r.max_abs_diff is not None and r.max_abs_diff < 1.0


@pytest.mark.parametrize("problem,sol,code,threads", WRONG, ids=[s for _, s, _, _ in WRONG])
def test_wrong_fixture_fails(problem, sol, code, threads):
    r = _ev(problem, sol, threads=threads)
    codes = code if isinstance(code, tuple) else (code,)
    assert r.compiled and not r.correct and r.reward == -1.0
    assert set(codes) & set(r.codes()), (r.codes(None), r.reason)
    assert r.rounds and r.rounds[0]["where"] == "trial 0" and not r.rounds[0]["ok"]  # caught on the first round


def test_race_is_invisible_with_one_thread():
    """With one thread the same kernel is correct (the bug needs a second thread)."""
    assert _ev("row_softmax", "wrong_race.py", threads=1).correct


def test_torch_binding_load_inline_fixture(torch_binding_build):
    torch_binding_build.result(timeout=900)
    r = _ev("kb_l1_19_ReLU", "correct_load_inline.py", compile_timeout_s=900)
    assert r.correct, (r.codes(None), r.reason)
    assert r.findings == []


def test_degenerate_problem_is_not_admitted():
    from shiftkit.kernels.evaluate import admit_problem

    f = admit_problem(load_problem(PROBLEMS / "degenerate_max_minus_mean.py"), EvalConfig())
    assert [x.code for x in f] == ["degenerate_problem"] and "all-zero" in f[0].message
    for p, _ in CORRECT:
        assert admit_problem(load_problem(PROBLEMS / f"{p}.py"), EvalConfig()) == [], p


BROKEN = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.type = nn.Embedding(2, 8)  # nn.Module.type (a method) shadows the submodule: self.type(x) raises

    def forward(self, x, t):
        return x + self.type(t)


def get_inputs():
    return [torch.randn(4, 8), torch.zeros(4, dtype=torch.long)]


def get_init_inputs():
    return []
"""


def test_a_reference_that_raises_is_the_problems_fault(tmp_path):
    """redteam12 p02: a reference raising on its own inputs was a ``harness_error`` (reward -1, "a bug to report").
    It is ``reference_error``, the problem's fault, reward 0 (as a degenerate problem), for any solution."""
    from shiftkit.kernels.evaluate import admit_problem

    bad = tmp_path / "broken_type_attr.py"
    bad.write_text(BROKEN)
    f = admit_problem(load_problem(bad), EvalConfig())
    assert [x.code for x in f] == ["reference_error"] and "TypeError" in f[0].message, f
    r = evaluate(bad, SOLUTIONS / "scale_shift_clamp" / "correct.py", EvalConfig(profile=False))
    assert r.reward == 0.0 and r.codes(None) == ["reference_error"] and r.stage == "admission", (r.codes(None), r.reason)


def test_profile_and_reward_end_to_end():
    """Full profile (eager baseline; compile baseline in the slow test), result API and to_dict."""
    r = evaluate(PROBLEMS / "scale_shift_clamp.py", SOLUTIONS / "scale_shift_clamp" / "correct.py",
                 EvalConfig(baseline_compile=False, timed_calls=12, max_timed_calls=12, min_block_rounds=4))
    assert isinstance(r, Result) and r.correct and r.compiled
    c, e = r.timings["candidate"], r.timings["eager"]
    assert c["n"] == 12 and e["n"] == 12 and len(c["times_ms"]) == 12
    assert c["median_ms"] > 0 and c["iqr_ms"] >= 0
    lo, hi = r.paired["eager"]["ci"]  # the speedup is the paired per-round ratio, inside its CI
    assert lo <= r.speedup_eager <= hi and r.paired["rounds"] == 12  # natural rounds: the clock's
    assert r.paired["spot_rounds"] > 0 and r.paired["rechecked"] == 12 + r.paired["spot_rounds"]  # all compared
    assert r.paired["eager"]["decision"] in ("above", "below", "undecided")
    assert r.sandbox["samples"]["candidate"] > 0 and 0.3 < r.sandbox["sample_coverage"]  # the parent saw the kernel run
    assert r.speedup_compile is None
    assert r.reward in (1.0, 2.0) and "eager" in r.reason
    d = r.to_dict()
    for k in ("compiled", "correct", "findings", "timings", "speedup_eager", "speedup_compile", "reward", "reason",
              "compile_errors"):
        assert k in d


def test_log_speedup_reward_config():
    r = _ev("rowsum_scale", "correct.py", reward="log_speedup")
    assert r.correct and r.reward == 0.0 and "not profiled" in r.reason  # no timing -> log(1) = 0


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SHIFTKIT_KERNELS_FULL"), reason="torch.compile baseline costs ~10-35 s cold; "
                    "set SHIFTKIT_KERNELS_FULL=1 (benchmarks/bench_kernel_eval.py covers it too)")
def test_full_profile_with_compile_baseline():
    r = evaluate(PROBLEMS / "fused_bias_relu_residual.py", SOLUTIONS / "fused_bias_relu_residual" / "correct.py",
                 EvalConfig())
    assert r.correct and r.speedup_compile is not None and "compile" in r.timings
    assert r.reward in (1.0, 2.0, 3.0)
