"""Build cache and structured compile errors; worker isolation: crash, hang, OOM, output flood, network."""

import time
from pathlib import Path

import pytest

from shiftkit.kernels import EvalConfig, compile_only, evaluate, load_problem, load_solution
from shiftkit.kernels.build import build
from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS
from shiftkit.kernels.solution import spec_from_load_c

pytestmark = pytest.mark.usefixtures("torch_binding_build")  # start the slow build early, in the background

HERE = Path(__file__).parent / "solutions"
RS = PROBLEMS / "rowsum_scale.py"


def test_build_cache_hit_and_content_key(tmp_path):
    src = 'extern "C" void one(float* y) { y[0] = 1.f; }\n'
    spec = spec_from_load_c({"name": "one", "source": src})
    r1 = build(spec, tmp_path)
    r2 = build(spec, tmp_path)
    assert r1.ok and not r1.cached and r2.ok and r2.cached and r1.so_path == r2.so_path and r1.key == r2.key
    r3 = build(spec_from_load_c({"name": "one", "source": src + "// changed\n"}), tmp_path)
    assert r3.ok and not r3.cached and r3.key != r1.key


def test_compile_errors_are_structured():
    r = compile_only(RS, HERE / "compile_error.py", EvalConfig())
    assert not r.compiled and r.reward == -1.0 and "compile_error" in r.codes()
    e = r.compile_errors[0]
    assert e.file == "source.cpp" and e.line == 4 and "undeclared_thing" in e.message
    again = compile_only(RS, HERE / "compile_error.py", EvalConfig())
    assert again.builds[0]["cached"] and again.compile_errors[0].line == 4  # failures are cached too


def test_compile_only_ok():
    r = compile_only(RS, SOLUTIONS / "rowsum_scale" / "correct.py")
    assert r.compiled and r.compile_errors == [] and r.reason == "compiled"


@pytest.mark.parametrize("sol,code,over", [
    ("segfault", "worker_crash", {}),
    ("hang", "timeout", {"timeout_s": 8.0}),
    ("oom", "out_of_memory", {"mem_limit_mb": 1024}),
    ("flood", "output_limit", {"max_output_bytes": 20000}),
])
def test_worker_failures_are_structured(sol, code, over):
    t = time.perf_counter()
    r = evaluate(RS, HERE / f"{sol}.py", EvalConfig(profile=False, **over))
    assert not r.correct and r.reward == -1.0
    assert code in r.codes(), (r.codes(None), r.reason)
    assert time.perf_counter() - t < 60


def test_worker_has_no_network():
    r = evaluate(RS, HERE / "network.py", EvalConfig(profile=False))
    assert not r.correct and "runtime_error" in r.codes()
    assert r.sandbox["isolated"]
    assert "Connection refused" in r.reason or "unreachable" in r.reason  # a fresh network namespace: loopback only


def test_harness_survives_a_crash():
    evaluate(RS, HERE / "segfault.py", EvalConfig(profile=False))
    r = evaluate(RS, SOLUTIONS / "rowsum_scale" / "correct.py", EvalConfig(profile=False))
    assert r.correct, r.reason


CAPABILITY = '''import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

lib = load_c(name="cp", source=r"""
#include <cstdint>
extern "C" void cp(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i]; }
""")
CAP = torch.backends.cpu.get_cpu_capability()


class ModelNew(nn.Module):
    def __init__(self, *a):
        super().__init__()
        if CAP != WANT:
            raise RuntimeError(f"torch's CPU capability in the worker: {CAP}, the parent's: {WANT}")

    def forward(self, x):
        y = torch.empty_like(x)
        lib.cp(x, y, x.numel())
        return y
'''
COPY_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.clone()


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


def test_candidate_torch_runs_the_parents_cpu_capability(tmp_path):
    """A candidate's /proc is an empty tmpfs, and ATen picks its vector kernels through cpuinfo, which reads
    /proc/cpuinfo: the zygote decides the capability before it forks, so a candidate's torch ops run the
    machine's AVX2/AVX512 kernels as the baselines do, not the scalar DEFAULT ones (measured before the fix)."""
    import torch

    (tmp_path / "p.py").write_text(COPY_PROBLEM)
    (tmp_path / "s.py").write_text(CAPABILITY.replace("WANT", repr(torch.backends.cpu.get_cpu_capability())))
    r = evaluate(load_problem(tmp_path / "p.py"), load_solution(tmp_path / "s.py"), EvalConfig(profile=False, trials=1))
    assert r.correct, r.reason


def test_a_zygote_out_of_budget_is_a_timeout_not_a_missing_sandbox(tmp_path):
    """Proof of 9e2568d beside load: a 6.3M-element problem's reference work used the whole run budget, and the
    zygote, given the 1 s left, was reported as IsolationUnavailable (a ShiftkitError out of evaluate()). A start
    that runs out of its budget is a timeout (a WorkerFailure: evaluate() makes it a finding), and leaves nothing."""
    import os

    from shiftkit.kernels import sandbox

    (tmp_path / "inductor").mkdir()
    before = set(os.listdir("/proc"))
    with pytest.raises(sandbox.WorkerFailure) as e:
        sandbox.Zygote(True, str(tmp_path / "inductor"), start_timeout_s=0.001)
    assert e.value.code == "timeout" and "budget" in e.value.message, e.value.message
    time.sleep(0.5)
    left = [p for p in set(os.listdir("/proc")) - before if p.isdigit() and os.path.exists(f"/proc/{p}/cmdline")
            and "zygote" in open(f"/proc/{p}/cmdline").read()]
    assert not left, left
