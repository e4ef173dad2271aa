"""CUDA backend: builds and evaluates the CUDA fixtures and hacks. Skipped cleanly without a GPU
(run scripts/gpu_check.sh on a GPU machine)."""

import pytest
import torch

from shiftkit.kernels import EvalConfig, evaluate
from shiftkit.kernels.fixtures import PROBLEMS, ROOT

CUDA = ROOT / "cuda"
PROBLEM = PROBLEMS / "scale_shift_clamp.py"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _ev(name, **over):
    return evaluate(PROBLEM, CUDA / f"scale_shift_clamp_{name}.py", EvalConfig(backend="cuda", **over))


def test_cuda_correct_solution_passes_and_profiles():
    r = _ev("correct", baseline_compile=False)
    assert r.compiled and r.correct, (r.codes(None), r.reason, r.compile_errors)
    assert r.timings["candidate"]["n"] == 30 and r.speedup_eager is not None


@pytest.mark.parametrize("name,code", [("hack_noop", ("output_mismatch",)),
                                       ("hack_fallback", ("blocked_torch_op", "torch_compute"))])
def test_cuda_hacks_are_caught(name, code):
    r = _ev(name, profile=False)
    assert not r.correct and set(code) & set(r.codes()), (r.codes(None), r.reason)


def test_cuda_stream_hack_gains_nothing():
    """The worker's device-wide sync means the side-stream output is complete when the clock stops."""
    r = _ev("hack_stream", baseline_compile=False)
    assert r.compiled
    assert r.correct  # no gain: timing includes every stream (device-wide synchronize before the clock stops)


def test_cuda_graph_replay_is_caught_at_runtime():
    """A graph captured on the first inputs replays stale results on new inputs."""
    r = _ev("hack_graph", profile=False)
    assert not r.correct and {"output_mismatch", "nondeterministic"} & set(r.codes()), r.codes(None)


def test_persisting_l2_and_events_gain_nothing():
    r = _ev("hack_l2", baseline_compile=False)
    assert r.correct and r.paired["eager"]["speedup"] < 10  # inputs are fresh each round: no L2 reuse to gain


def test_physical_floor_uses_the_device_bandwidth():
    from shiftkit.kernels.evaluate import memory_bandwidth

    bw = memory_bandwidth("cuda")
    assert bw > 100e9  # HBM-class device: > 100 GB/s
    r = _ev("correct", baseline_compile=False)
    assert r.paired["floor_ms"] < r.timings["candidate"]["median_ms"]
    bad = _ev("correct", baseline_compile=False, floor_bandwidth_factor=1e-6)  # an absurd floor flags, never rejects
    assert bad.correct and "below_physical_floor" in bad.codes("review")
