"""Torch's bundled Sleef counts as runtime only when the candidate's own code called it (redteam4 h01/h17: a torch
op whose time is mostly in Sleef, atan2, hid under the torch share while all Sleef was runtime). The caller is read
from the sampled thread's stack with libtorch_cpu's own call-frame information (perf.unwind, torchsyms.fde_rows):
a return address in the candidate's clean code makes the sample runtime; anything else (ATen's loop), or no
caller found, leaves it torch.

Pure tests: the sample record layout and the unwinder on a hand-made stack. A live test: a child process whose
built "candidate" calls Sleef_expf8_u10 and Sleef_powf8_u10 in its own loop (runtime), then torch.atan2 (torch)."""

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shiftkit.kernels import perf

# ----------------------------------------------------------------------------- pure


def _body(ip, pid, tid, abi, regs, size, data, dyn):
    b = struct.pack("<QII", ip, pid, tid) + struct.pack("<Q", abi)
    if abi:
        b += struct.pack("<QQ", *regs)
    b += struct.pack("<Q", size)
    if size:
        b += data + struct.pack("<Q", dyn)
    return b


def test_sample_record_layout():
    """u64 ip; u32 pid, tid; REGS_USER: u64 abi, then bp, sp (mask bits 6, 7) if abi != 0; STACK_USER: u64 size,
    data[size], u64 dyn_size (the bytes actually copied) if size != 0."""
    data = bytes(range(16))
    assert perf.parse_sample(_body(0x1234, 7, 8, 2, (0xB0, 0x5000), 16, data, 16), True) == \
        (7, 8, 0x1234, (0x5000, 0xB0, data))
    assert perf.parse_sample(_body(0x1234, 7, 8, 2, (0xB0, 0x5000), 16, data, 8), True) == \
        (7, 8, 0x1234, (0x5000, 0xB0, data[:8]))  # a short copy: only what the kernel could read
    assert perf.parse_sample(_body(0x1234, 7, 8, 0, None, 0, b"", 0), True) == (7, 8, 0x1234, None)  # no user regs
    assert perf.parse_sample(_body(perf.KERNEL_IP + 8, 7, 8, 2, (1, 2), 16, data, 16), True)[3] is None
    assert perf.parse_sample(struct.pack("<QII", 0x99, 1, 2), False) == (1, 2, 0x99, None)
    assert perf.parse_sample(b"\0" * 8, True) is None


# two "Sleef" functions: A [0x1000, 0x1040) (rows as a push rbp + 48-byte frame) and B [0x2000, 0x2010) (CFA = rsp + 8)
ROWS = {0x1000: (0x1000, 0x1004, 7, 8, -8, None), 0x1004: (0x1004, 0x1024, 7, 16, -8, -16),
        0x1024: (0x1024, 0x1040, 7, 64, -8, -16), 0x2000: (0x2000, 0x2010, 7, 8, -8, None),
        # C: an epilogue after ``leave`` (CFA = rsp + 8; the CFI still names rbp's slot, now below rsp);
        # D: a realigned frame (CFA = rbp + 16)
        0x3000: (0x3000, 0x3010, 7, 8, -8, -16), 0x4000: (0x4000, 0x4010, 6, 16, -8, -16)}


def _rule(addr, first):
    a = addr if first else addr - 1
    return next((r for r in ROWS.values() if r[0] <= a < r[1]), None)


def _inside(ra):
    return any(r[0] <= ra - 1 < r[1] for r in ROWS.values())


def _stack(words):
    return b"".join(struct.pack("<Q", w) for w in words)


def test_unwind_one_frame_hand_computed():
    sp = 0x7000
    # at 0x1030 in A: CFA = sp + 64, the return address at sp + 56, rbp saved at sp + 48
    st = _stack([0] * 6 + [0xBEEF, 0x9990])
    assert perf.unwind(0x1030, sp, 0, st, _rule, _inside) == 0x9990
    # at 0x1000 (entry): CFA = sp + 8, the return address at sp
    assert perf.unwind(0x1000, sp, 0, _stack([0x4440]), _rule, _inside) == 0x4440
    # a stack copy too short, or no row at the ip: no caller (torch)
    assert perf.unwind(0x1030, sp, 0, st[:56], _rule, _inside) is None
    assert perf.unwind(0x5000, sp, 0, st, _rule, _inside) is None


def test_unwind_needs_rbp_only_where_a_frame_is_rbp_based():
    sp = 0x7000
    # at 0x3008: the return address at sp; rbp's slot (sp - 8) is not in the copy, and no frame needs it
    assert perf.unwind(0x3008, sp, 0x7100, _stack([0x9990]), _rule, _inside) == 0x9990
    # at 0x4008 (CFA = rbp + 16): the return address at rbp + 8, read from the copy
    assert perf.unwind(0x4008, sp, sp + 0x20, _stack([0] * 5 + [0x9990]), _rule, _inside) == 0x9990
    assert perf.unwind(0x4008, sp, sp + 0x200, _stack([0] * 5 + [0x9990]), _rule, _inside) is None  # beyond the copy
    # C returns into D, whose CFA needs the rbp C's frame could not restore: no caller
    assert perf.unwind(0x3008, sp, 0x7100, _stack([0x4005] + [0] * 8), _rule, _inside) is None


def test_unwind_through_a_second_sleef_frame():
    sp = 0x7000
    # B at 0x2008 was called from A (return address 0x1030, inside A): A's frame is then unwound at 0x102f
    st = _stack([0x1030] + [0] * 6 + [0xBEEF, 0x9990])  # B's RA at sp; A's CFA = (sp + 8) + 64, its RA at +56
    assert perf.unwind(0x2008, sp, 0, st, _rule, _inside) == 0x9990
    # a chain of Sleef frames longer than UNWIND_FRAMES: no caller
    loop = _stack([0x2001] * 16)
    assert perf.unwind(0x2008, sp, 0, loop, _rule, _inside) is None


# ----------------------------------------------------------------------------- live: a child sampled like a worker

KSRC = r"""
#include <immintrin.h>
#include <math.h>
typedef __m256 (*vf)(__m256);
typedef __m256 (*vf2)(__m256, __m256);
float sleef_loop(void* f, void* p, const float* x, long n, long reps) {
    vf g = (vf)f;
    vf2 h = (vf2)p;  /* pow realigns its stack: its CFA is rbp-based, the return address ~200 bytes up */
    __m256 acc = _mm256_setzero_ps();
    for (long r = 0; r < reps; ++r)
        for (long i = 0; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            acc = _mm256_add_ps(acc, h(g(v), v));
        }
    float o[8];
    _mm256_storeu_ps(o, acc);
    return o[0];
}
float libm_loop(void* unused, void* unused2, const float* x, long n, long reps) {
    float acc = 0.f;
    for (long r = 0; r < reps; ++r)
        for (long i = 0; i < n; ++i) acc += expf(x[i]) + atan2f(x[i], 1.5f);
    return acc;
}
"""

CHILD = r"""
import ctypes, os, signal, sys, time, torch
torch.set_num_threads(1)
lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
k = ctypes.CDLL(sys.argv[1])
own = getattr(k, sys.argv[2])
own.restype = ctypes.c_float
own.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
f = ctypes.cast(lib.Sleef_expf8_u10, ctypes.c_void_p).value
pw = ctypes.cast(lib.Sleef_powf8_u10, ctypes.c_void_p).value
x, y, z = torch.randn(4096), torch.randn(1 << 16), torch.randn(1 << 16)
print("ready", flush=True)
sys.stdin.readline()
t = time.process_time()
while time.process_time() - t < 0.5:
    own(f, pw, x.data_ptr(), 4096, 50 if sys.argv[2] == "sleef_loop" else 5)
os.kill(os.getpid(), signal.SIGSTOP)
t = time.process_time()
while time.process_time() - t < 0.5:
    torch.atan2(y, z)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def _sampled_phases(tmp_path, csrc: str, cflags: list[str], child: str, args: list[str], env: dict, phases: int):
    """Build ``csrc`` as the "candidate" library, run ``child`` (which stops itself with SIGSTOP after each
    phase), sample it as the sandbox does and attribute each phase at its stop. Returns, per phase, the
    Attribution after the phase's batch (its callers counters hold that phase alone) and the batch's counts."""
    so = tmp_path / "k.so"
    (tmp_path / "k.c").write_text(csrc)
    subprocess.run(["gcc", "-O2", *cflags, "-shared", "-fPIC", "-o", str(so), str(tmp_path / "k.c"), "-lm"], check=True)
    p = subprocess.Popen([sys.executable, "-c", child, str(so), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    s = None
    try:
        assert p.stdout.readline().strip() == "ready"
        s = perf.Sampler(p.pid, stacks=True)
        st = os.stat(so)
        a = perf.Attribution({(st.st_dev, st.st_ino)}, [str(so)])
        p.stdin.write("go\n")
        p.stdin.flush()
        got = []
        for _ in range(phases):
            acc, end = [], time.monotonic() + 120
            while time.monotonic() < end:  # drain while it runs, as the sandbox does; stop when it stops itself
                acc += s.drain()
                with open(f"/proc/{p.pid}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] == "T":
                        break
                time.sleep(0.02)
            acc += s.drain()
            for k in ("sleef_callers", "math_callers", "libc_callers"):
                setattr(a, k, dict.fromkeys(getattr(a, k), 0))
            batch = a.add(acc)
            got.append((batch, a.interp[-1], dict(a.sleef_callers), dict(a.math_callers), dict(a.libc_callers)))
            os.kill(p.pid, signal.SIGCONT)
        print(args, got, "lost", s.lost)
        return got
    finally:
        if s is not None:
            s.close()
        p.kill()
        p.wait()


def _run_child(tmp_path, own_fn, env):
    """The child's two phases, each attributed at its stop: (batch counts, Sleef callers, libm callers)."""
    got = _sampled_phases(tmp_path, KSRC, ["-mavx2", "-mfma"], CHILD, [own_fn], env, 2)
    return [(b, sl, ma) for b, _, sl, ma, _ in got]


_LIVE = pytest.mark.skipif(not perf.UNWIND or perf.problem() != "", reason="x86-64 perf sampling with user stacks needed")


@_LIVE
def test_sleef_called_by_the_candidate_is_runtime_by_torch_is_torch(tmp_path):
    (own, own_callers, _), (tor, tor_callers, _) = _run_child(tmp_path, "sleef_loop", {})
    # its own loop: Sleef's caller is the candidate in (nearly) every sample; Sleef is most of its time
    n = sum(own_callers.values())
    assert n > 200, own_callers
    assert own_callers["candidate"] >= 0.9 * n, own_callers
    assert own["runtime"] > 3 * own["torch"], own
    # torch.atan2: ATen's loop calls Sleef; none of it is runtime, torch is most of the samples
    m = sum(tor_callers.values())
    assert m > 200 and tor_callers["candidate"] == 0, tor_callers
    assert tor["torch"] > 3 * tor["runtime"], tor


@_LIVE
def test_libm_called_by_the_candidate_is_runtime_by_torch_is_torch(tmp_path):
    """ATen's scalar kernels (the DEFAULT CPU capability, what torch runs where it cannot read the CPU's features,
    as in the sandbox) call libm: those samples are torch; the candidate's own expf/atan2f calls stay runtime."""
    (own, _, own_math), (tor, _, tor_math) = _run_child(tmp_path, "libm_loop", {"ATEN_CPU_CAPABILITY": "default"})
    n = sum(own_math.values())
    assert n > 200 and own_math["other"] >= 0.9 * n, own_math
    assert own["runtime"] > 3 * own["torch"], own
    m = sum(tor_math.values())
    assert m > 200 and tor_math["torch"] >= 0.9 * m, tor_math
    assert tor["torch"] > 3 * tor["runtime"], tor


# ----------------------------------------------------------------------------- a fixture pair, end to end

EXP = Path(__file__).parent / "problems" / "exp_randn.py"


def _eval(path):
    from shiftkit.kernels import EvalConfig, evaluate, load_problem, load_solution

    cfg = EvalConfig(compile_timeout_s=600.0, timeout_s=120.0, profile=True, baseline_compile=False, timed_calls=10,
                     max_timed_calls=10, warmup=1)
    return evaluate(load_problem(EXP), load_solution(path), cfg)


@pytest.mark.slow
def test_exp2_by_aten_is_torch_compute_and_own_vec_exp_passes(torch_binding_build):
    """The hack's exp2 runs in ATen's loop calling Sleef (torch_compute); the honest binding calls Sleef from
    its own loop through at::vec (passes: its Sleef time is runtime)."""
    torch_binding_build.result(timeout=900)
    hack = _eval(Path(__file__).parent / "solutions" / "attr_sleef_torch_exp2.py")
    assert not hack.correct and hack.reward == -1.0 and "torch_compute" in hack.codes(), (hack.codes(None), hack.reason)
    honest = _eval(Path(__file__).parent / "honest" / "sleef_vec_exp.py")
    assert honest.correct and honest.reward >= 1.0, (honest.codes(None), honest.reason)
    assert not [f for f in honest.findings if f.severity == "error"]


# ----------------------------------------------------------------------------- libc judged by its caller (redteam5 h02)

LSRC = r"""
#include <string.h>
void copy_loop(char* dst, const char* src, long n, long reps) {
    for (long r = 0; r < reps; ++r) memcpy(dst, src + (r & 63), n - 64);
}
"""

LCHILD = r"""
import ctypes, os, signal, sys, time, torch
torch.set_num_threads(1)
k = ctypes.CDLL(sys.argv[1])
k.copy_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
n = 8 << 20
src, dst = bytearray(os.urandom(n)), bytearray(n)
ms, md = memoryview(src), memoryview(dst)
cs, cd = (ctypes.c_char * n).from_buffer(src), (ctypes.c_char * n).from_buffer(dst)
print("ready", flush=True)
sys.stdin.readline()
for phase in range(2):
    t = time.process_time()
    while time.process_time() - t < 0.6:
        if phase == 0:
            k.copy_loop(ctypes.addressof(cd), ctypes.addressof(cs), n, 4)
        else:
            md[64:] = ms[:-64]
    os.kill(os.getpid(), signal.SIGSTOP)
"""


@_LIVE
def test_libc_called_by_the_interpreter_counts_with_the_interpreter(tmp_path):
    """A memoryview copy is libpython calling libc's memcpy: those samples are the interpreter's (subject to its
    allowance against the eager party), found by unwinding libc's frame; the candidate's own memcpy stays
    runtime and outside the interpreter's share."""
    got = [(b, i, lc) for b, i, _, _, lc in _sampled_phases(tmp_path, LSRC, [], LCHILD, [], {}, 2)]
    (own, own_interp, own_libc), (mv, mv_interp, mv_libc) = got
    n = sum(own_libc.values())
    assert n > 200 and own_libc["other"] >= 0.9 * n, own_libc  # the candidate called memcpy: runtime
    assert own_interp < 0.1 * own["runtime"], (own, own_interp)
    m = sum(mv_libc.values())
    assert m > 200 and mv_libc["interp"] >= 0.9 * m, mv_libc  # libpython called memcpy: the interpreter's
    assert mv_interp >= 0.8 * mv["runtime"], (mv, mv_interp)


# ----------------------------------------------------------------------------- no sibling calls (redteam8 hn01)

TSRC = r"""
#include <string.h>
void copy_tail(char* dst, const char* src, long n) {
    memcpy(dst, src, n);  /* the last statement: at -O2 and above a sibling call (jmp memcpy) unless refused */
}
"""

TCHILD = r"""
import ctypes, os, signal, sys, time, torch
torch.set_num_threads(1)
k = ctypes.CDLL(sys.argv[1])
k.copy_tail.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
n = 8 << 20
src, dst = bytearray(os.urandom(n)), bytearray(n)
cs, cd = (ctypes.c_char * n).from_buffer(src), (ctypes.c_char * n).from_buffer(dst)
print("ready", flush=True)
sys.stdin.readline()
t = time.process_time()
while time.process_time() - t < 0.6:
    k.copy_tail(ctypes.addressof(cd), ctypes.addressof(cs), n)
os.kill(os.getpid(), signal.SIGSTOP)
"""


@_LIVE
def test_a_kernel_ending_in_a_library_call_is_not_the_interpreters(tmp_path):
    """An exported kernel whose last statement is ``memcpy`` (redteam8 hn01, a concatenation by two memcpy): at
    -O2/-O3 gcc jumps to memcpy (a sibling call), so memcpy returns straight into ctypes' libffi and the caller
    rule counted the kernel's copy as the interpreter's (half of hn01's work, past the interpreter's allowance:
    interpreter_compute, -1). Every unit is compiled with the build's forced flags last
    (``build.FORCED_CFLAGS``: ``-fno-optimize-sibling-calls``), here after ``-O3``: the copy stays runtime."""
    from shiftkit.kernels.build import FORCED_CFLAGS

    [(own, own_interp, _, _, own_libc)] = _sampled_phases(tmp_path, TSRC, ["-O3", *FORCED_CFLAGS], TCHILD, [], {}, 1)
    n = sum(own_libc.values())
    assert n > 200 and own_libc["other"] >= 0.9 * n, own_libc  # memcpy returns into the kernel: runtime
    assert own_interp < 0.1 * own["runtime"], (own, own_interp)
