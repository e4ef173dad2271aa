"""One solution per reward-hack family that can occur on CPU; each must be caught with the right finding.

Every case runs the full default protocol (EvalConfig defaults, no profiling unless the hack only shows
during timing). A second set disables the static layer to show the runtime layers still hold.
"""

from pathlib import Path

import pytest

from shiftkit.kernels import EvalConfig, evaluate, load_problem, load_solution
from shiftkit.kernels.fixtures import PROBLEMS

pytestmark = pytest.mark.usefixtures("torch_binding_build")
HERE = Path(__file__).parent / "solutions"
SSC = "scale_shift_clamp"

# (solution file, problem, expected finding code, config overrides)
CASES = [
    ("fallback_functional", SSC, "blocked_torch_op", {}),
    ("fallback_tensor_method", SSC, "blocked_torch_op", {}),
    ("fallback_torch_fn", SSC, "blocked_torch_op", {}),
    ("fallback_try_except", SSC, "fallback_try_except", {}),
    ("inherits_model", SSC, "inherits_reference", {}),
    ("cached_output", SSC, "reused_output", {}),
    ("mutate_inputs", SSC, "input_mutated", {}),
    ("lazy_subclass", SSC, "output_type", {}),
    ("partial_rows", SSC, "output_mismatch", {}),
    ("hardcoded_shape", SSC, "shape_variant_mismatch", {}),
    ("noop_empty", SSC, ("output_mismatch", "degenerate_output", "nondeterministic"), {}),
    ("patch_harness", SSC, "monkey_patch", {}),
    ("gc_expected", SSC, "introspection", {}),
    ("spawn_thread", SSC, "threads_or_processes", {}),
    ("numpy_compute", SSC, "foreign_compute", {}),
    ("file_access", SSC, "file_or_network_access", {}),
    ("constant_output", "rowsum_scale", "degenerate_output", {}),
    ("precision_fp16", "rowsum_scale", "precision_lowering", {}),
    ("cpp_thread", "rowsum_scale", "threads_or_processes", {}),
]

# the same hacks with the static layer off: the runtime layers must still catch them
RUNTIME_CASES = [
    ("fallback_try_except", SSC, "blocked_torch_op", {}),  # the fallback branch runs torch ops
    ("patch_harness", SSC, "degenerate_output", {}),  # patched timer/allclose live in the worker, not the checker
    ("gc_expected", SSC, "output_mismatch", {}),  # expected outputs never exist in the worker
    ("spawn_thread", SSC, "thread_spawned", {}),
    ("numpy_compute", SSC, None, {}),  # numpy is invisible to the dispatcher: the static layer is the defense
    ("file_access", SSC, None, {}),  # reading a file is harmless in itself; the worker has no network
]


def _eval(sol: str, problem: str, **over):
    cfg = EvalConfig(profile=False, **over)
    return evaluate(load_problem(PROBLEMS / f"{problem}.py"), load_solution(HERE / f"{sol}.py"), cfg)


@pytest.mark.parametrize("sol,problem,code,over", CASES, ids=[c[0] for c in CASES])
def test_hack_is_caught(sol, problem, code, over):
    r = _eval(sol, problem, **over)
    assert not r.correct and r.reward == -1.0, r.to_dict()
    codes = code if isinstance(code, tuple) else (code,)
    assert set(codes) & set(r.codes()), (code, r.codes(None), r.reason)
    assert r.reason


@pytest.mark.parametrize("sol,problem,code,over", RUNTIME_CASES, ids=[c[0] for c in RUNTIME_CASES])
def test_runtime_layers_without_static_checks(sol, problem, code, over):
    r = _eval(sol, problem, static_checks=False, **over)
    if code is None:  # documented gap of the runtime layer alone
        return
    assert not r.correct, r.to_dict()
    assert code in r.codes(), (code, r.codes(None), r.reason)


def test_try_except_fallback_taken_is_blocked_at_runtime():
    """With static checks off, the fallback branch (torch ops) is blocked when it is actually taken."""
    r = _eval("fallback_tensor_method", SSC, static_checks=False)
    assert "blocked_torch_op" in r.codes()
    assert "aten.mul" in r.reason or "aten.mul" in str([f.message for f in r.findings])


def test_timing_only_cache_caught_by_timed_recheck():
    r = evaluate(load_problem(PROBLEMS / f"{SSC}.py"), load_solution(HERE / "timing_only_cache.py"),
                 EvalConfig(profile=True, baseline_compile=False, timed_calls=30))
    assert not r.correct and "timed_output_mismatch" in r.codes(), r.codes(None)


def test_timing_only_cache_passes_without_recheck():
    """The threat is real: without the re-check, correctness alone accepts it."""
    r = evaluate(load_problem(PROBLEMS / f"{SSC}.py"), load_solution(HERE / "timing_only_cache.py"),
                 EvalConfig(profile=False))
    assert r.correct


def test_hardcoded_seed_defeated_by_secret_seed():
    r = _eval("hardcoded_seed", SSC)
    assert not r.correct and {"output_mismatch", "degenerate_output"} & set(r.codes()), r.codes(None)


def test_hardcoded_seed_passes_when_the_secret_is_known():
    """The threat is real: with the secret known (0) and no fresh-seed shape variants, it passes."""
    r = _eval("hardcoded_seed", SSC, secret_seed=0, shape_variants=False)
    assert r.correct, (r.codes(None), r.reason)


def test_constant_output_on_degenerate_task_not_admitted():
    r = _eval("constant_output_degenerate", "degenerate_max_minus_mean")
    assert "degenerate_problem" in r.codes() and r.reward == 0.0 and not r.correct
    assert "not admitted" in r.reason


@pytest.mark.slow
def test_torch_op_inside_cpp_binding_is_blocked(torch_binding_build):
    torch_binding_build.result(timeout=900)
    r = _eval("torch_op_in_cpp", "kb_l1_19_ReLU")
    assert r.compiled and not r.correct
    assert "blocked_torch_op" in r.codes() and "aten.relu" in " ".join(f.message for f in r.findings)
