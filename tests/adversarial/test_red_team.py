"""The harness's own contract beyond single fixtures: one JSON object on the CLI whatever the candidate
prints; no secret from the environment; a changed artefact is never loaded; a long-lived caller (a server)
keeps no descriptor, process, memory region or cgroup after many evaluations, including failed ones."""

import json
import os
from pathlib import Path

import pytest

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import EvalConfig, evaluate
from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

pytestmark = pytest.mark.usefixtures("torch_binding_build")
SOL = Path(__file__).parent / "solutions"
SSC = "scale_shift_clamp"


def test_cli_output_is_one_json_object_despite_stdout_forgery(capsys):
    from shiftkit.cli import main

    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / f"{SSC}.py"), "--solution", str(SOL / "stdout_forgery.py"),
               "--backend", "cpu", "profile=false", "--json"])
    out = capsys.readouterr().out
    assert rc == 0  # a candidate failure never changes the exit code
    d = json.loads(out)  # exactly one JSON document on stdout
    assert d["reward"] == -1.0 and d["correct"] is False and d["findings"] and d["reason"] and "forged" not in out


def test_the_secret_is_never_read_from_the_environment(monkeypatch):
    """Inputs come from a fresh per-evaluation secret; an operator's environment variable (which a solution
    could be written against) is refused with a one-line error that says what to do instead."""
    monkeypatch.setenv("SHIFTKIT_KERNEL_SECRET_SEED", "424242")
    with pytest.raises(ShiftkitError, match="secret_seed"):
        evaluate(PROBLEMS / f"{SSC}.py", SOLUTIONS / SSC / "correct.py", EvalConfig(profile=False))


def test_secret_from_env_fixture_finds_nothing():
    r = evaluate(PROBLEMS / f"{SSC}.py", SOL / "secret_from_env.py", EvalConfig(profile=False, trials=2))
    assert r.correct, (r.codes(None), r.reason)  # it returns zeros if it finds the secret anywhere


def test_tampered_artefact_is_never_loaded(tmp_path):
    from shiftkit.kernels.build import build
    from shiftkit.kernels.specs import spec_from_load_c

    spec = spec_from_load_c({"name": "one", "source": 'extern "C" void one(float* y) { y[0] = 1.f; }\n'})
    r1 = build(spec, tmp_path)
    Path(r1.so_path).write_bytes(b"not an ELF")
    r2 = build(spec, tmp_path)
    assert r2.ok and not r2.cached and r2.sha256 == r1.sha256


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_many_evaluations_in_one_process_leak_nothing():
    """A server calls evaluate() forever: after a warm-up, descriptors are back where they were after each of
    an honest, a crashing, a hanging and a protocol-breaking evaluation."""
    p = PROBLEMS / f"{SSC}.py"
    cfg = EvalConfig(profile=False, trials=1, transforms=False, timeout_s=20)
    evaluate(p, SOLUTIONS / SSC / "correct.py", cfg)  # the zygote and caches exist from here on
    before = _fds()
    for sol in (SOLUTIONS / SSC / "correct.py", SOL / "mutate_inputs.py", SOL / "partial_frame.py",
                SOL / "garbage_frame.py", SOLUTIONS / SSC / "correct.py"):
        evaluate(p, sol, cfg)
    assert _fds() == before
