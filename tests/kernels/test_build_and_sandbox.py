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
