"""Issue #10 pieces without a worker: framing, paired statistics and rewards, flag allowlist, vendor-symbol
check, output layout, profiler escapes, the new C++ patterns; and with processes: cgroup accounting of a
whole tree (exited children included), fail-closed isolation, CLI exit codes."""

import importlib
import math
import os
import socket
import threading
import time

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import correctness as C
from shiftkit.kernels import reward, static, stats, wire
from shiftkit.kernels.blocking import profiled_escapes
from shiftkit.kernels.build import vendor_symbols


def codes(fs):
    return {f.code for f in fs if f.severity == "error"}


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


def test_reply_header_schema():
    from shiftkit.kernels.sandbox import header_problem

    assert header_problem({"reply_to": "run", "ok": True, "nonce": 3, "violations": {"aten.mul": 2}}) is None
    assert header_problem({"x-unknown": [1]}) is None
    assert "violations" in header_problem({"violations": [1, 2]})
    assert "violations" in header_problem({"violations": {"aten.mul": "2"}})
    assert "nonce" in header_problem({"nonce": "7"}) and "nonce" in header_problem({"nonce": True})
    assert "ok" in header_problem({"ok": 1})
    assert header_problem({"error": "e" * 200_000}) is not None


def test_sample_digest_touches_every_page_and_sees_changes():
    x = torch.zeros(10 * 1024)  # 40 KiB: 10 pages
    d = wire.sample_digest(x, 5)
    assert d == wire.sample_digest(x.clone(), 5)
    y = x.clone()
    y.view(torch.uint8)[9 * 4096 + 5] = 1  # a byte on the last page at the sampled offset
    assert wire.sample_digest(y, 5) != d
    z = x.clone()
    z.view(torch.uint8)[9 * 4096 + 6] = 1  # another offset: invisible to this nonce, visible to another
    assert wire.sample_digest(z, 5) == d and wire.sample_digest(z, 6) != wire.sample_digest(x, 6)
    assert wire.sample_digest(torch.zeros(3), 1) != wire.sample_digest(torch.zeros(4), 1)  # shapes count


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


def test_untimed_work_bound():
    from shiftkit.kernels.evaluate import untimed_work_bound

    assert untimed_work_bound(1e6, 4e6) == 2e6  # the 2 ms floor
    assert untimed_work_bound(10e6, 4e6) == 5e6  # half the candidate's own time
    assert untimed_work_bound(1e6, 20e6) == 5e6  # a quarter of the baseline's outside time


# ----------------------------------------------------------------------------- build flags, vendor BLAS

def test_flag_allowlist():
    ok = ["-O3", "-march=native", "-mavx2", "-mfma", "-fopenmp", "-DTILE=64", "-std=c++17", "-Wno-unused", "-ffast-math"]
    assert static.disallowed_flags(ok) == []
    bad = ["-O3; touch /tmp/x", "-fplugin=/tmp/x.so", "-I/etc", "-include/etc/passwd", "@/tmp/resp", "-Wl,-rpath,/tmp",
           "-specs=/tmp/s", "-B/tmp", "-o/tmp/x", "-DX=$(id)", "-Wa,-x", "--sysroot=/"]
    assert static.disallowed_flags(bad) == bad
    assert static.disallowed_flags([], ["--use_fast_math", "-arch=sm_90"], ["-fopenmp", "-lm"]) == []
    assert static.disallowed_flags([], ["-ccbin=/tmp/cc"], ["-lcublas", "-L/tmp"]) == ["-ccbin=/tmp/cc", "-lcublas", "-L/tmp"]
    assert codes(static.check_flags(["-fplugin=x"])) == {"build_flag"}
    assert codes(static.check_flags(["-ffast-math"])) == {"precision_lowering"}
    assert static.check_flags(["-ffast-math"], allow_reduced_precision=True) == []


def test_vendor_symbols_from_nm_output():
    nm = """                 U sgemm_
                 U cblas_sgemm@LIBMKL
                 w __gmon_start__
                 U memcpy@GLIBC_2.14
                 U GOMP_parallel@GOMP_4.0
                 U dnnl_sgemm
                 U expf@GLIBC_2.27
"""
    assert vendor_symbols(nm) == ["cblas_sgemm", "dnnl_sgemm", "sgemm_"]
    assert vendor_symbols("U memcpy\nU omp_get_thread_num\n") == []


# ----------------------------------------------------------------------------- layout, profiler escapes

def test_layout_problem():
    row = torch.arange(4.0).reshape(1, 4)
    assert "stride 0" in C.layout_problem(row.expand(3, 4))
    assert C.layout_problem(row.expand(3, 4).contiguous()) is None
    assert C.layout_problem(torch.ones(4, 3).t()) is None  # a transposed, fully materialised view is fine
    assert "overlap" in C.layout_problem(torch.ones(6).as_strided((3, 3), (1, 1)))
    assert C.layout_problem([torch.ones(2), (torch.ones(1).expand(5),)]) is not None
    assert C.layout_problem(torch.ones(1).expand(1, 1)) is None  # a single element cannot be unmaterialised


def test_profiled_escapes():
    names = ["aten::empty_like", "aten::mul", "aten::add", "aten::clamp", "myns::k", "aten::to", "python_op"]
    assert profiled_escapes(names, {"aten.mul": 1}, frozenset({"myns::k"})) == {"unblocked:aten.add": 1, "unblocked:aten.clamp": 1}
    assert profiled_escapes(["aten::empty", "aten::copy_", "aten::view"], {}) == {}


# ----------------------------------------------------------------------------- static C++/Python gaps

@pytest.mark.parametrize("src,code", [
    ("int f(){ return clone(g, s, 0x100, 0); }", "threads_or_processes"),
    ("int f(){ return vfork(); }", "threads_or_processes"),
    ("long f(){ return syscall(1, 2, 3); }", "threads_or_processes"),
    ("void f(){ kill(1, 9); }", "threads_or_processes"),
    ("void f(){ struct sigaction s; sigaction(11, &s, 0); }", "threads_or_processes"),
    ("void f(){ std::filesystem::remove(p); }", "threads_or_processes"),
    ("int f(){ return openat(-100, p, 0); }", "file_or_network_access"),
    ("int f(){ return creat(p, 0); }", "file_or_network_access"),
    ("void* f(){ return opendir(p); }", "file_or_network_access"),
    ("int f(){ return rename(a, b) + unlink(a); }", "file_or_network_access"),
    ("void f(int fd){ write(fd, b, 4); }", "file_or_network_access"),
    ("void f(){ Dl_info i; dladdr(p, &i); }", "file_or_network_access"),
    ("void f(){ mprotect(p, 4096, 0); }", "file_or_network_access"),
    ("const char* f(){ return secure_getenv(n); }", "file_or_network_access"),
    ('#include "../../../etc/passwd"\n', "file_or_network_access"),
    ('asm(".incbin \\"/etc/shadow\\"");', "file_or_network_access"),
    ("void f(){ sgemm_(a,b,c,d,e,f,g,h,i,j,k,l,m); }", "vendor_library"),
    ("#include <mkl.h>\n", "vendor_library"),
    ("void f(){ cblas_sgemm(1,2,3); }", "vendor_library"),
    ("#pragma GCC optimize(\"fast-math\")\n", "precision_lowering"),
    ("_Float16 x;", "precision_lowering"),
])
def test_cpp_gaps_are_flagged(src, code):
    assert code in codes(static.check_cpp(src))


def test_variable_named_half_is_not_precision_lowering():
    src = "void f(float* b, long n){ while (n > 1) { long half = n / 2; for (long r = 0; r < half; ++r) b[r] += b[r + half]; n = half; } }"
    assert static.check_cpp(src) == []
    assert "precision_lowering" in codes(static.check_cpp("__device__ void f(){ half h = __float2half(1.f); }", cuda=True))
    assert "precision_lowering" in codes(static.check_cpp("__global__ void k(half* x){ }", cuda=True))
    assert static.check_cpp("void f(torch::Tensor t){ auto u = t.clone(); }") == []  # a method, not clone(2)


def test_gpu_timing_families_are_flagged_on_cpu():
    from shiftkit.kernels import load_solution
    from shiftkit.kernels.evaluate import static_findings
    from shiftkit.kernels.fixtures import ROOT

    assert "library_substitution" in codes(static_findings(load_solution(ROOT / "cuda" / "scale_shift_clamp_hack_graph.py")))
    assert "timing_interference" in codes(static_findings(load_solution(ROOT / "cuda" / "scale_shift_clamp_hack_l2.py")))
    assert "timing_interference" in codes(static.check_cpp("void f(){ cudaGraphLaunch(g, 0); }"))


@pytest.mark.parametrize("snippet", [
    "import torch\nf = torch.compile(g)",
    "import torch\ny = torch._scaled_mm(a, b)",
    "from torch.utils._python_dispatch import _disable_current_modes",
    "import torch\n@torch.library.custom_op('a::b', mutates_args=())\ndef f(x): return x",
    "from torch.overrides import TorchFunctionMode",
    "import sys\nsys.addaudithook(print)",
    "import torch\nm = torch.jit.script(f)",
])
def test_library_substitution_in_python(snippet):
    assert "library_substitution" in codes(static.check_python(snippet))


# ----------------------------------------------------------------------------- processes: cgroup, isolation

def test_tree_group_counts_cpu_of_exited_children_and_kills_the_tree():
    from shiftkit.kernels import jail

    g = jail.make_group("skt", pids_max=16)
    if g is None:
        pytest.skip("cgroups are not writable here")
    try:
        pid = os.fork()
        if pid == 0:
            g.join()
            if os.fork() == 0:  # a grandchild burns CPU and exits before anyone looks
                t = time.process_time()
                while time.process_time() - t < 0.3:
                    pass
                os._exit(0)
            os.wait()
            if os.fork() == 0:  # another one stays behind
                time.sleep(60)
            os._exit(0)
        os.waitpid(pid, 0)
        assert g.cpu_ns() >= 0.25e9  # exited descendants are still accounted
        assert len(g.pids()) == 1
        g.kill()
        assert g.pids() == []
    finally:
        g.close()


def test_physical_floor_fires_below_the_bandwidth_bound():
    from shiftkit.kernels import EvalConfig, evaluate
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    cfg = dict(baseline_compile=False, timed_calls=6, max_timed_calls=6, warmup=1)
    p, s = PROBLEMS / "scale_shift_clamp.py", SOLUTIONS / "scale_shift_clamp" / "correct.py"
    r = evaluate(p, s, EvalConfig(**cfg, floor_bandwidth_factor=1e-6))  # an absurd bandwidth: floor above any time
    assert not r.correct and "below_physical_floor" in r.codes(), r.codes(None)
    ok = evaluate(p, s, EvalConfig(**cfg))
    assert ok.correct and 0 < ok.paired["floor_ms"] < ok.timings["candidate"]["median_ms"]


def test_isolation_unavailable_fails_closed(monkeypatch):
    E = importlib.import_module("shiftkit.kernels.evaluate")
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    monkeypatch.setitem(E._PROBE, "why", "unshare refused (simulated)")
    p, s = PROBLEMS / "rowsum_scale.py", SOLUTIONS / "rowsum_scale" / "correct.py"
    with pytest.raises(ShiftkitError, match="sandbox is unavailable"):
        E.evaluate(p, s, E.EvalConfig(profile=False))
    r = E.evaluate(p, s, E.EvalConfig(profile=False, allow_unisolated=True, trials=2))
    assert r.correct and r.sandbox["isolated"] is False
    assert "untrusted_result" in r.codes("review")


def test_cli_harness_failure_is_one_line_and_exit_2(monkeypatch, capsys):
    from shiftkit.cli import main
    E = importlib.import_module("shiftkit.kernels.evaluate")
    from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS

    monkeypatch.setitem(E._PROBE, "why", "unshare refused (simulated)")
    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / "rowsum_scale.py"), "--solution",
               str(SOLUTIONS / "rowsum_scale" / "correct.py"), "--backend", "cpu", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "sandbox is unavailable" in err[0]
