"""The protocol's parts without a full evaluation: framing, paired statistics and rewards; and with real
processes: the worker cgroup (whole-tree CPU time incl. exited children, freezing, killing), the parent's
sampling (it sees where a child's time goes), the read-only input region, fail-closed isolation, CLI exit
codes, the physical floor (a review flag, never a rejection)."""

import importlib
import math
import mmap
import os
import socket
import threading
import time

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import reward, shm, stats, wire


# ----------------------------------------------------------------------------- framing

def test_frame_roundtrip_and_malformed_frames():
    data = wire.pack({"cmd": "run", "nonce": 7}, b"xyz")
    assert wire.unpack(data) == ({"cmd": "run", "nonce": 7}, b"xyz")
    for bad in (data[:10], b"XXXX" + data[4:], data + b"!", wire._HDR.pack(wire.MAGIC, 2, 0) + b"[]"):
        with pytest.raises(wire.ProtocolError):
            wire.unpack(bad)


def _pair():
    a, b = socket.socketpair()
    return a, b, wire.Channel(a.fileno(), max_blob=1000)


def test_channel_caps_the_announced_length_before_reading():
    a, b, ch = _pair()
    b.sendall(wire._HDR.pack(wire.MAGIC, 10, 1 << 40))  # 1 TiB announced, nothing sent
    t = time.monotonic()
    with pytest.raises(wire.ProtocolError, match="exceeds the cap"):
        ch.recv(time.monotonic() + 5)
    assert time.monotonic() - t < 1


def test_channel_deadline_on_a_partial_frame():
    a, b, ch = _pair()
    b.sendall(wire.pack({"x": 1})[:9])
    t = time.monotonic()
    with pytest.raises(wire.ChannelTimeout):
        ch.recv(time.monotonic() + 0.3)
    assert 0.25 < time.monotonic() - t < 2


def test_channel_garbage_and_closed_peer():
    a, b, ch = _pair()
    b.sendall(b"\xde\xad\xbe\xef" * 8)
    with pytest.raises(wire.ProtocolError, match="magic"):
        ch.recv(time.monotonic() + 1)
    a2, b2, ch2 = _pair()
    b2.close()
    with pytest.raises(wire.ChannelClosed):
        ch2.recv(time.monotonic() + 1)
    a3, b3, ch3 = _pair()
    threading.Thread(target=lambda: b3.sendall(wire.pack({"ok": True}, b"12345")), daemon=True).start()
    assert ch3.recv(time.monotonic() + 5) == ({"ok": True}, b"12345")


# ----------------------------------------------------------------------------- paired statistics, rewards

def test_median_ci_order_statistics_hand_computed():
    # n=10: ranks (2, 9), coverage 1 - 2 * 11/1024 = 97.9 %; ranks (3, 8) would cover only 89 %
    assert stats.median_ci(list(range(1, 11))) == (2, 5.5, 9)
    assert stats.median_ci(list(range(1, 31))) == (10, 15.5, 21)  # the textbook n=30 ranks
    assert stats.median_ci([3, 1, 2]) == (1, 2, 3)  # too few values: the whole range
    assert stats.median_ci([5.0] * 20) == (5.0, 5.0, 5.0)  # degenerate: a point
    with pytest.raises(ValueError):
        stats.median_ci([])


def test_log_ratios_and_decide():
    assert stats.log_ratios([200, 300, 0], [100, 100, 50]) == [math.log(2), math.log(3)]
    thr = reward.threshold(0.05)
    assert thr == pytest.approx(1 / 0.95)
    assert stats.decide((math.log(1.1), 0, math.log(1.3)), thr) == "above"
    assert stats.decide((math.log(0.8), 0, math.log(1.04)), thr) == "below"
    assert stats.decide((math.log(1.0), 0, math.log(1.2)), thr) == "undecided"


def test_paired_milestone_reward():
    f = reward.paired_milestone_reward
    assert f(False, "above", "above", 2, 2)[0] == -1.0
    assert f(True, "above", "above", 2.0, 1.5)[:3:2] == (3.0, False)
    assert f(True, "above", "undecided", 2.0, 1.05)[:3:2] == (2.0, True)  # lower milestone, inconclusive
    assert f(True, "above", "below", 2.0, 0.9)[:3:2] == (2.0, False)
    assert f(True, "above", None, 2.0, None)[:3:2] == (2.0, False)  # no compile baseline
    assert f(True, "undecided", "above", 1.04, 1.5)[:3:2] == (1.0, True)
    assert f(True, "below", "above", 0.5, 1.5)[:3:2] == (1.0, False)


# ----------------------------------------------------------------------------- processes: cgroup, sampling, regions

def test_tree_group_counts_cpu_of_exited_children_freezes_and_kills():
    from shiftkit.kernels import cgroups

    g = cgroups.make_group("skt", pids_max=16)
    try:
        pid = os.fork()
        if pid == 0:
            g.join(os.getpid())
            if os.fork() == 0:  # a grandchild burns CPU and exits before anyone looks
                t = time.process_time()
                while time.process_time() - t < 0.3:
                    pass
                os._exit(0)
            os.wait()
            if os.fork() == 0:  # another one stays behind, busy
                while True:
                    pass
            os._exit(0)
        os.waitpid(pid, 0)
        assert g.cpu_ns() >= 0.25e9  # exited descendants are still accounted
        assert len(g.pids()) == 1
        assert g.freeze(time.monotonic() + 30) and g.frozen()
        c0 = g.cpu_ns()
        time.sleep(0.3)
        assert g.cpu_ns() == c0  # a frozen tree uses no CPU
        g.thaw()
        g.kill()
        assert g.pids() == []
    finally:
        g.close()


def test_reaper_removes_frozen_trees_of_a_dead_parent_and_nothing_else():
    """A parent killed by a signal leaves its frozen tree and group behind; the next parent's first group
    reaps it. A group whose parent lives, or another user's naming, is left alone; a reused pid (its process
    started after the group was made) counts as gone."""
    import subprocess

    from shiftkit.kernels import cgroups

    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)  # a parent that is gone
    live = subprocess.Popen(["sleep", "60"])  # a parent that lives (started before its group)
    time.sleep(0.05)
    now = cgroups._boot_ns()
    orphan = cgroups.TreeGroup(f"skwtest_{dead}_{now}")
    kept = cgroups.TreeGroup(f"skwtest_{live.pid}_{now}")
    child = subprocess.Popen(["sleep", "60"])
    try:
        orphan.join(child.pid)
        assert orphan.freeze(time.monotonic() + 30)  # frozen: SIGKILL alone would not end it
        reaped = cgroups.reap_orphans("skwtest")
        assert sorted(reaped) == sorted(orphan.dirs.values()) and child.wait(timeout=30) == -9
        assert all(os.path.isdir(d) for d in kept.dirs.values())
        assert cgroups.orphan(f"skwtest_{live.pid}_{now - 30 * 10**9}", "skwtest")  # pid reused since
        assert not cgroups.orphan(f"skwtest_{live.pid}_{now}", "skwtest")
        assert not cgroups.orphan(f"other_{dead}_{now}", "skwtest") and not cgroups.orphan("skwtest_x_1", "skwtest")
    finally:
        orphan.close()  # kills and thaws first: a frozen child could not be waited for
        kept.close()
        for p in (child, live):
            p.kill()
            p.wait(timeout=30)


def test_sampler_attributes_a_childs_time_to_the_library_it_runs_in():
    """The parent's events see where a child spends its CPU: a loop in libm is 'runtime', the same work
    through torch is 'torch' (non-vacuity of the sampling verdict's inputs)."""
    from shiftkit.kernels import perf

    def child_run(fn):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            torch.set_num_threads(1)  # no OpenMP pool in a forked child
            os.read(r, 1)
            fn()
            os._exit(0)
        s = perf.Sampler(pid, period_ns=100_000)
        os.write(w, b"g")
        os.waitpid(pid, 0)
        a = perf.Attribution(set())
        # the child is gone, so attribute with our own maps (same libraries at the same addresses after fork)
        counts = dict.fromkeys(perf.CATEGORIES, 0)
        for _, _, ip in s.drain():
            counts[a.category(os.getpid(), ip)[0]] += 1
        s.close()
        return counts

    x, y = torch.randn(1 << 20), torch.empty(1 << 20)
    t = child_run(lambda: [torch.exp(x, out=y) for _ in range(40)])  # no allocation: no page-fault time
    assert t["torch"] > 0.5 * sum(t.values()), t
    import ctypes

    libm = ctypes.CDLL("libm.so.6")
    libm.exp.restype, libm.exp.argtypes = ctypes.c_double, [ctypes.c_double]
    m = child_run(lambda: [libm.exp(0.5) for _ in range(400_000)])
    assert m["torch"] < 0.1 * sum(m.values()), m


def test_a_worker_runs_only_inside_its_rounds():
    """Frozen on the reply and kept frozen: a thread that spins forever in the worker gets no CPU between
    rounds (the cgroup's whole-tree counter does not move), and does get it inside a round."""
    import tempfile
    from pathlib import Path

    from shiftkit.kernels import load_problem, sandbox

    prob = load_problem(Path(__file__).parent / "problems" / "busy_thread.py")
    setup = {"mode": "reference", "backend": "cpu", "device": "cpu", "threads": 1, "builds": [], "isolate": True,
             "cpu_s": 300, "max_output_bytes": 100_000, "env": sandbox.base_env()}
    w = sandbox.Worker(setup, {"problem.py": str(prob.path)}, 4096, time.monotonic() + 300, None, 64, 0,
                       tempfile.gettempdir())
    try:
        w.load(wire.dumps_tensors({"init": [], "state": {}}))
        x = prob.inputs(1)
        lay_in, lay_out = shm.layout(list(x))[0], shm.layout(x[0] + 1.0)[0]
        rr = w.round(list(x), lay_in, lay_out)
        assert rr.header["ok"] and torch.equal(w.outputs(lay_out, rr.header), x[0] + 1.0)
        assert w.group.frozen()
        c0 = w.group.cpu_ns()
        time.sleep(0.3)
        assert w.group.cpu_ns() == c0  # nothing ran between rounds
    finally:
        w.close()
    import threading

    assert "busy_thread_spin" not in {t.name for t in threading.enumerate()}  # it spun in the worker, not here


def test_input_region_is_read_only_for_the_worker():
    r = shm.Region("t", 4096, readonly_for_worker=True)
    try:
        r.write([torch.ones(4)], shm.layout([torch.ones(4)])[0])  # the parent writes
        with pytest.raises(PermissionError):
            mmap.mmap(r.fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)  # a new writable map: refused
        with pytest.raises(PermissionError):
            os.pwrite(r.fd, b"x", 0)
        ro = mmap.mmap(r.fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ)
        assert torch.frombuffer(ro, dtype=torch.float32, count=4).sum() == 4.0
        ro.close()
    finally:
        r.close()


def test_region_round_trip():
    out = shm.Region("o", 4096, readonly_for_worker=False)
    try:
        x = [torch.arange(6.0).reshape(2, 3), (torch.tensor([1, 2]), 5)]
        lay, _ = shm.layout(x)
        out.write(x, lay)
        got = out.read(lay)
        assert torch.equal(got[0], x[0]) and torch.equal(got[1][0], x[1][0]) and got[1][1] == 5 and isinstance(got[1], tuple)
    finally:
        out.close()


def test_physical_floor_is_a_review_flag_that_cannot_reject_honest_code(monkeypatch):
    """A timing floor cannot reject: with the copy bandwidth measured absurdly low (as on a loaded machine, or
    a kernel that moves fewer bytes than assumed) an honest kernel keeps its verdict and its reward and gets
    only a review flag; with the real bandwidth nothing is flagged."""
    from shiftkit.kernels import EvalConfig

    E = importlib.import_module("shiftkit.kernels.evaluate")  # the module (the package exports the function)
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    cfg = dict(baseline_compile=False, timed_calls=6, max_timed_calls=6, warmup=1, trials=1, transforms=False,
               shape_variants=False, determinism=False, timing_blocks=1, min_block_rounds=6)
    p, s = PROBLEMS / "scale_shift_clamp.py", SOLUTIONS / "scale_shift_clamp" / "correct.py"
    monkeypatch.setitem(E._BANDWIDTH, "cpu", 1e3)  # 1 kB/s: the floor is above any time
    r = E.evaluate(p, s, EvalConfig(**cfg))
    assert r.correct and r.reward >= 1 and "below_physical_floor" in r.codes("review"), (r.codes(None), r.reason)
    assert "below_physical_floor" not in r.codes("error")
    monkeypatch.setitem(E._BANDWIDTH, "cpu", 1e15)
    ok = E.evaluate(p, s, EvalConfig(**cfg))
    assert ok.correct and 0 < ok.paired["floor_ms"] < ok.timings["candidate"]["median_ms"]
    assert "below_physical_floor" not in ok.codes(None)


def test_isolation_unavailable_fails_closed(monkeypatch):
    from shiftkit.kernels import sandbox
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    E = importlib.import_module("shiftkit.kernels.evaluate")
    monkeypatch.setitem(sandbox._PROBE, "why", "unshare refused (simulated)")
    p, s = PROBLEMS / "rowsum_scale.py", SOLUTIONS / "rowsum_scale" / "correct.py"
    with pytest.raises(ShiftkitError, match="sandbox is unavailable"):
        E.evaluate(p, s, E.EvalConfig(profile=False))
    r = E.evaluate(p, s, E.EvalConfig(profile=False, allow_unisolated=True, trials=2))
    assert r.correct and r.sandbox["isolated"] is False, (r.codes(None), r.reason)
    assert "untrusted_result" in r.codes("review")


@pytest.mark.parametrize("facility", ["cgroups", "perf", "vm_read", "bwrap"])
def test_a_missing_facility_is_a_one_line_error_never_a_fallback(monkeypatch, facility):
    """cgroups, perf_event_open and process_vm_readv have no fallback: even allow_unisolated does not waive
    them. A missing bwrap (or user namespaces) is waived only by allow_unisolated. Each is one line naming it."""
    from shiftkit.kernels import cgroups, perf, sandbox, shm
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    E = importlib.import_module("shiftkit.kernels.evaluate")
    monkeypatch.setattr(sandbox, "_PROBE", {})
    if facility == "bwrap":
        monkeypatch.setattr(sandbox.shutil, "which", lambda name, *a, **k: None)
    else:
        mod = {"cgroups": cgroups, "perf": perf, "vm_read": shm}[facility]
        monkeypatch.setattr(mod, "vm_read_problem" if facility == "vm_read" else "problem", lambda: "refused (simulated)")
    p, s = PROBLEMS / "rowsum_scale.py", SOLUTIONS / "rowsum_scale" / "correct.py"
    name = {"cgroups": "cgroups", "perf": "perf_event_open", "vm_read": "process_vm_readv", "bwrap": "bwrap"}[facility]
    for waive in (False, True):
        if facility == "bwrap" and waive:
            continue  # waived: runs unisolated (test_isolation_unavailable_fails_closed)
        with pytest.raises(ShiftkitError) as ei:
            E.evaluate(p, s, E.EvalConfig(profile=False, allow_unisolated=waive))
        msg = str(ei.value)
        assert name in msg and "\n" not in msg, msg


def test_the_facilities_exist_on_this_machine():
    """Non-vacuity of the probes above: on the machine the tier runs on, each real probe says ''."""
    from shiftkit.kernels import sandbox, shm

    assert shm.vm_read_problem() == ""
    assert sandbox.facility_problem() == "" and sandbox.isolation_problem() == ""


def test_cli_harness_failure_is_one_line_and_exit_2(monkeypatch, capsys):
    from shiftkit.cli import main
    from shiftkit.kernels import sandbox
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    monkeypatch.setitem(sandbox._PROBE, "why", "unshare refused (simulated)")
    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / "rowsum_scale.py"), "--solution",
               str(SOLUTIONS / "rowsum_scale" / "correct.py"), "--backend", "cpu", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "sandbox is unavailable" in err[0]
