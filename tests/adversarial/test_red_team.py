"""Fresh fixtures for the families of issue #10: each hack is rejected with the right finding by the default
protocol (``CASES``) and, with the static layer off, by the runtime layers (``RUNTIME``); honest solutions
that stress the checks pass; malformed frames, floods, fork bombs and compile bombs end within the
deadline plus a fixed slack, and nothing the evaluation started survives it."""

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from shiftkit.kernels import EvalConfig, evaluate, load_problem, load_solution
from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

pytestmark = pytest.mark.usefixtures("torch_binding_build")
HERE = Path(__file__).parent
SOL, HON, PROB = HERE / "solutions", HERE / "honest", HERE / "problems"
SSC, MM, SUM = "scale_shift_clamp", "kb_l1_1_Square_matrix_multiplication", "kb_l1_47_Sum_reduction_over_a_dimension"
SLACK_S = 20.0  # fixed slack on top of the configured deadlines (process start-up and teardown on a loaded box)


def _prob(name: str):
    return load_problem(PROB / f"{name}.py") if (PROB / f"{name}.py").is_file() else load_problem(PROBLEMS / f"{name}.py")


def _eval(sol, problem=SSC, **over):
    cfg = EvalConfig(**({"profile": False} | over))
    path = SOL / sol if (SOL / sol).is_dir() else SOL / f"{sol}.py"
    return evaluate(_prob(problem), load_solution(path), cfg)


# (fixture, problem, acceptable finding codes) under the default protocol (static checks on)
CASES = [
    ("flag_injection", SSC, {"build_flag"}),
    ("include_host_file", SSC, {"file_or_network_access"}),
    ("compile_bomb", SSC, {"file_or_network_access"}),
    ("harness_state_write", SSC, {"file_or_network_access"}),
    ("forged_done_frame", SSC, {"file_or_network_access"}),
    ("partial_frame", SSC, {"file_or_network_access"}),
    ("fork_bomb", SSC, {"threads_or_processes"}),
    ("orphan_daemon", SSC, {"threads_or_processes"}),
    ("lazy_thread_output", SSC, {"threads_or_processes"}),
    ("lazy_pages", SSC, {"threads_or_processes", "file_or_network_access"}),
    ("persistent_mode", SSC, {"library_substitution"}),
    ("clone_vm_escape", SSC, {"threads_or_processes"}),
    ("mutate_allowlist", SSC, {"monkey_patch"}),
    ("disable_modes", SSC, {"library_substitution"}),
    ("python_custom_op", SSC, {"library_substitution"}),
    ("secret_from_env", SSC, {"file_or_network_access"}),
    ("cpp_syscalls", SSC, {"threads_or_processes", "file_or_network_access"}),
    ("patch_main", SSC, {"introspection", "monkey_patch"}),
    ("torch_compile_kernel", SSC, {"library_substitution"}),
    ("decoy_kernel", SSC, {"library_substitution"}),
    ("scaled_mm", MM, {"library_substitution"}),
    ("vendor_sgemm", MM, {"vendor_library"}),
    ("workspace_helper_numpy", SSC, {"foreign_compute"}),
    # no static signal: the runtime layers decide under the default protocol too
    ("expand_output", "colmean_rows", {"output_layout"}),
    ("hardcoded_constants", SSC, {"shape_variant_mismatch"}),
    ("stdout_forgery", SSC, {"degenerate_output", "output_mismatch"}),
    ("flood_stdout", SSC, {"output_limit"}),
]


@pytest.mark.parametrize("sol,problem,codes", CASES, ids=[c[0] for c in CASES])
def test_red_team_hack_is_rejected(sol, problem, codes):
    r = _eval(sol, problem, compile_timeout_s=30, max_output_bytes=200_000)
    assert not r.correct and r.reward == -1.0, r.to_dict()
    assert codes & set(r.codes()), (codes, r.codes(None), r.reason)


# the same hacks with the static layer off: the sandbox, protocol and runtime checks must hold alone
RUNTIME = [
    ("flag_injection", SSC, {"build_flag"}, {}),
    ("forged_done_frame", SSC, {"protocol_violation"}, {}),
    ("huge_frame", SSC, {"protocol_violation"}, {}),
    ("garbage_frame", SSC, {"protocol_violation"}, {}),
    ("malformed_header", SSC, {"protocol_violation"}, {}),
    ("persistent_mode", SSC, {"harness_tampering"}, {}),
    ("mutate_allowlist", SSC, {"blocked_torch_op"}, {}),
    ("disable_modes", SSC, {"blocked_torch_op"}, {}),
    ("python_custom_op", SSC, {"blocked_torch_op"}, {}),
    ("decoy_kernel", SSC, {"blocked_torch_op", "decoy_kernel"}, {}),
    ("scaled_mm", MM, {"blocked_torch_op"}, {}),
    ("vendor_sgemm", MM, {"vendor_library"}, {}),
    ("fork_bomb", SSC, {"thread_spawned"}, {}),
    ("orphan_daemon", SSC, {"thread_spawned"}, {}),
    ("lazy_thread_output", SSC, {"thread_spawned", "output_mismatch", "lazy_output", "degenerate_output"}, {}),
    # the thread is within the allowance: the in-window digest (or, when the thread is late, the comparison)
    ("lazy_thread_output", SSC, {"lazy_output", "output_mismatch"}, {"threads": 2}),
]


@pytest.mark.parametrize("sol,problem,codes,over", RUNTIME, ids=[c[0] + ("_threads2" if c[3] else "") for c in RUNTIME])
def test_runtime_layers_hold_without_static_checks(sol, problem, codes, over):
    r = _eval(sol, problem, static_checks=False, timeout_s=60, **over)
    assert not r.correct and r.reward == -1.0, r.to_dict()
    assert codes & set(r.codes()), (codes, r.codes(None), r.reason)


# hacks that only show while timed (profile on, short paired window)
TIMED = [
    ("inplace_during_timing", {"input_mutated", "lazy_output"}),
    ("batch_and_skip", {"lazy_output", "timed_output_mismatch"}),
    ("warmup_detect", {"timed_output_mismatch"}),
    ("replay_version", {"reused_output", "timed_output_mismatch", "output_mismatch", "nondeterministic"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("sol,codes", TIMED, ids=[c[0] for c in TIMED])
def test_timing_only_hacks_are_rejected(sol, codes):
    r = _eval(sol, profile=True, baseline_compile=False, timed_calls=10, max_timed_calls=10, warmup=1)
    assert not r.correct and r.reward == -1.0, r.to_dict()
    assert codes & set(r.codes()), (codes, r.codes(None), r.reason)


HONEST = [
    ("intrinsics_avx2.py", SSC, {}),
    ("blocked_matmul.py", MM, {}),
    ("tree_reduction_half.py", SUM, {}),
]


@pytest.mark.parametrize("sol,problem,over", HONEST, ids=[c[0] for c in HONEST])
def test_honest_solutions_that_stress_the_checks_pass(sol, problem, over):
    r = evaluate(_prob(problem), load_solution(HON / sol), EvalConfig(profile=False, **over))
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)
    assert not [f for f in r.findings if f.severity == "error"]


def test_openmp_within_the_thread_allowance_passes():
    r = evaluate(_prob(SSC), load_solution(SOLUTIONS / SSC / "correct.py"), EvalConfig(profile=False, threads=2))
    assert r.correct, (r.codes(None), r.reason)


def _so_hashes(cache: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in cache.glob("builds/*/work/*.so")}


def test_candidate_cannot_write_harness_state():
    """At import the candidate tries to forge a baseline, overwrite built artefacts and delete cached
    results: all on a read-only view, so the cache is unchanged and the evaluation is the honest one."""
    cache = Path(os.environ["SHIFTKIT_KERNEL_CACHE"])
    for stale in (cache / "CANARY_WRITTEN", cache / "baselines" / "forged.json"):  # e.g. from a mutant run
        stale.unlink(missing_ok=True)
    _eval("harness_state_write", static_checks=False)  # build once
    before = _so_hashes(cache)
    results = {p: p.stat().st_mtime_ns for p in cache.glob("builds/*/result.json")}
    r = _eval("harness_state_write", static_checks=False)
    assert r.correct, (r.codes(None), r.reason)
    assert _so_hashes(cache) == before and before
    assert {p: p.stat().st_mtime_ns for p in cache.glob("builds/*/result.json")} == results
    assert not (cache / "CANARY_WRITTEN").exists() and not (cache / "baselines" / "forged.json").exists()


def test_tampered_artefact_is_never_loaded(tmp_path):
    """An artefact changed after its build (outside the sandbox) fails its hash check and is rebuilt."""
    from shiftkit.kernels.build import build
    from shiftkit.kernels.solution import spec_from_load_c

    spec = spec_from_load_c({"name": "one", "source": 'extern "C" void one(float* y) { y[0] = 1.f; }\n'})
    r1 = build(spec, tmp_path)
    Path(r1.so_path).write_bytes(b"not an ELF")
    r2 = build(spec, tmp_path)
    assert r2.ok and not r2.cached and r2.sha256 == r1.sha256


def test_secret_seed_never_reaches_the_worker(monkeypatch):
    """The fixture returns zeros (a visible failure) if it finds the secret anywhere it can look."""
    monkeypatch.setenv("SHIFTKIT_KERNEL_SECRET_SEED", "424242")
    from shiftkit.kernels import sandbox

    sandbox._CTX = None  # a fresh forkserver, started while the secret is set in our environment
    from multiprocessing import forkserver

    forkserver._forkserver._stop()
    r = _eval("secret_from_env", static_checks=False)
    assert r.correct, (r.codes(None), r.reason)


def _ours() -> set[int]:
    """Processes (zombies included) that this test process started: descendants, or members of a cgroup
    it created (sandboxed trees; their names carry our pid). Other agents' evaluations are not counted."""
    me = os.getpid()
    tags = (f"/skw_{me}_", f"/skb_{me}_")
    parent, out = {}, set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open(f"/proc/{d}/stat").read()
            parent[int(d)] = int(st.rsplit(")", 1)[1].split()[1])
            cg = open(f"/proc/{d}/cgroup").read()
            if any(t in cg for t in tags):
                out.add(int(d))
        except (OSError, IndexError, ValueError):
            continue
    for pid in parent:
        p, seen = pid, 0
        while p > 1 and seen < 64:
            p, seen = parent.get(p, 0), seen + 1
            if p == me:
                out.add(pid)
                break
    return out


def _zombies_of_init() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        try:
            st = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            if d.isdigit() and st[0] == "Z" and st[1] == "1" and st[3] == str(os.getpgrp()):
                out.append(int(d))
        except (OSError, IndexError):
            continue
    return out


ZOMBIES_BEFORE = set(_zombies_of_init())

BOUNDED = [
    ("partial_frame", {"timeout_s": 10.0}, {"timeout"}),
    ("huge_frame", {"timeout_s": 10.0}, {"protocol_violation"}),
    ("garbage_frame", {"timeout_s": 10.0}, {"protocol_violation"}),
    ("malformed_header", {"timeout_s": 10.0}, {"protocol_violation"}),
    ("flood_stdout", {"timeout_s": 10.0, "max_output_bytes": 100_000}, {"output_limit"}),
    ("fork_bomb", {"timeout_s": 10.0}, {"thread_spawned", "timeout"}),
    ("orphan_daemon", {"timeout_s": 10.0}, {"thread_spawned"}),
    ("compile_bomb", {"compile_timeout_s": 5.0, "timeout_s": 10.0}, {"compile_error"}),  # memory rlimit
    ("compile_bomb_cpu", {"compile_timeout_s": 5.0, "timeout_s": 10.0}, {"compile_error"}),  # killed at timeout
]


@pytest.mark.parametrize("sol,over,codes", BOUNDED, ids=[c[0] for c in BOUNDED])
def test_evaluate_returns_in_time_and_leaves_nothing_behind(sol, over, codes):
    _eval("harness_state_write", static_checks=False)  # forkserver and caches warm: not counted as leftovers
    before = _ours()
    t0 = time.perf_counter()
    r = _eval(sol, static_checks=False, **over)
    took = time.perf_counter() - t0
    assert codes & set(r.codes()), (codes, r.codes(None), r.reason)
    if sol == "compile_bomb_cpu":  # killed at the timeout, or (on a fast machine) stopped by gcc's own
        assert "timed out" in r.reason or "exceeds limit" in r.reason, r.reason  # constexpr-ops limit first
    assert took < over.get("compile_timeout_s", 0) + over["timeout_s"] + SLACK_S, took
    time.sleep(0.5)
    left = _ours() - before
    assert not left, {p: open(f"/proc/{p}/stat").read()[:60] for p in left if os.path.exists(f"/proc/{p}")}
    zombies = [p for p in _zombies_of_init() if p not in ZOMBIES_BEFORE]
    assert not zombies, zombies  # no orphan was left for an init that does not reap
    for ctl in ("cpuacct", "pids", "freezer"):
        base = Path("/sys/fs/cgroup") / ctl
        assert not [d for d in base.glob(f"sk?_{os.getpid()}_*")], ctl


def test_cli_output_is_one_json_object_despite_stdout_forgery(capsys):
    from shiftkit.cli import main

    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / f"{SSC}.py"), "--solution", str(SOL / "stdout_forgery.py"),
               "--backend", "cpu", "profile=false", "--json"])
    out = capsys.readouterr().out
    assert rc == 0  # a candidate failure never changes the exit code
    d = json.loads(out)  # exactly one JSON document on stdout
    assert d["reward"] == -1.0 and d["correct"] is False and d["findings"] and d["reason"] and "forged" not in out
