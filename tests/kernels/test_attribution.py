"""Sample attribution (shiftkit/kernels/perf.py, evaluate.foreign_verdict): the runtime by exact identity, the
O(log n) lookup, the executable-segment check of candidate mappings, fresh maps at every batch, the mapping cap
and the per-window share. Pure functions with hand-made inputs; the process-level checks use this process's
own mappings (no worker, no sampling)."""

import ctypes
import mmap
import os
import subprocess
import time

import pytest

from shiftkit.kernels import perf
from shiftkit.kernels.evaluate import foreign_verdict, round_windows
from shiftkit.kernels.perf import classify_path, exec_segments, lookup

TORCH = ("/venv/site-packages/torch/", "/venv/site-packages/torch.libs/")
PY = ("/py/3.11/",)


def cls(path: str) -> str:
    return classify_path(path, False, TORCH, PY)


# ----------------------------------------------------------------------------- classify_path


def test_runtime_is_exact_system_sonames():
    for p in ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libmvec.so.1",
              "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
              "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0",
              "/usr/lib/x86_64-linux-gnu/libpthread.so.0", "/usr/lib/x86_64-linux-gnu/libffi.so.8.1.2",
              "/lib64/libc-2.17.so", "[vdso]", "[vsyscall]"):
        assert cls(p) == "runtime", p


def test_prefixes_of_runtime_names_are_foreign():
    # "libcrypt" once matched libcrypto by prefix; compression and crypto libraries compute
    for p in ("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/lib/x86_64-linux-gnu/libcrypt.so.1",
              "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "/usr/lib/x86_64-linux-gnu/libbz2.so.1.0.4",
              "/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3.libc.so.6x",
              "/usr/lib/x86_64-linux-gnu/libc.so.6.evil", "/usr/lib/x86_64-linux-gnu/libmfoo.so",
              "/usr/lib/x86_64-linux-gnu/libopenblas.so.0", "/usr/lib/x86_64-linux-gnu/libssl.so.3"):
        assert cls(p) == "foreign", p


def test_runtime_names_outside_system_dirs_are_foreign():
    assert cls("/tmp/libc.so.6") == "foreign"
    assert cls("/sol/libm.so.6") == "foreign"
    assert cls("/memfd:libc.so.6 (deleted)") == "foreign"


def test_python_prefix_is_only_the_interpreter_and_plumbing():
    assert cls("/py/3.11/bin/python3.11") == "runtime"
    assert cls("/py/3.11/lib/libpython3.11.so.1.0") == "runtime"
    assert cls("/py/3.11/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so") == "runtime"
    assert cls("/py/3.11/lib/python3.11/lib-dynload/_socket.cpython-311-x86_64-linux-gnu.so") == "runtime"
    for mod in ("audioop", "_decimal", "zlib", "_hashlib", "math", "cmath", "_sqlite3", "array", "binascii", "_random"):
        assert cls(f"/py/3.11/lib/python3.11/lib-dynload/{mod}.cpython-311-x86_64-linux-gnu.so") == "foreign", mod
    assert cls("/py/3.11/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.so") == "foreign"
    assert cls("/py/3.11/lib/libcrypto.so.3") == "foreign"  # a library beside libpython is not the runtime
    assert cls("/py/3.11/bin/python3.11-evil") == "foreign"
    assert cls("/py/3.11/lib/python3.11/lib-dynload/x/_ctypes.so") == "foreign"  # not directly in lib-dynload


def test_torch_and_its_gomp():
    assert cls("/venv/site-packages/torch/lib/libtorch_cpu.so") == "torch"
    assert cls("/venv/site-packages/torch.libs/libgomp-a34b3233.so.1") == "runtime"
    assert cls("/venv/site-packages/torch/lib/libgomp_compute.so") == "torch"
    assert classify_path("/anything", True, TORCH, PY) == "candidate"


def test_classify_degenerate():
    assert cls("") == "foreign"
    assert classify_path("/usr/lib/x86_64-linux-gnu/libc.so.6", False, (), ()) == "runtime"
    assert classify_path("/py/3.11/bin/python3.11", False, (), ()) == "foreign"  # no python dirs: no interpreter


# ----------------------------------------------------------------------------- lookup


def test_lookup_bisect():
    ranges = [(0x1000, 0x2000, "candidate", "a"), (0x2000, 0x3000, "torch", "t"), (0x5000, 0x6000, "runtime", "r")]
    starts = [r[0] for r in ranges]
    assert lookup(starts, ranges, 0x1000) == ("candidate", "a")
    assert lookup(starts, ranges, 0x1FFF) == ("candidate", "a")
    assert lookup(starts, ranges, 0x2000) == ("torch", "t")
    assert lookup(starts, ranges, 0x3000) == ("foreign", "[unmapped]")  # a gap
    assert lookup(starts, ranges, 0x5FFF) == ("runtime", "r")
    assert lookup(starts, ranges, 0x6000) == ("foreign", "[unmapped]")
    assert lookup(starts, ranges, 0xFFF) == ("foreign", "[unmapped]")
    assert lookup([], [], 0x1234) == ("foreign", "[unmapped]")  # degenerate: nothing mapped


def test_lookup_is_logarithmic():
    n = 200_000
    ranges = [(k * 0x2000, k * 0x2000 + 0x1000, "foreign", str(k)) for k in range(n)]
    starts = [r[0] for r in ranges]
    t = time.perf_counter()
    for k in range(0, n, 7):
        assert lookup(starts, ranges, k * 0x2000 + 5)[1] == str(k)
    assert time.perf_counter() - t < 2.0  # a linear scan would take minutes


# ----------------------------------------------------------------------------- per-window share


def test_round_windows():
    r = [{"candidate": 10}, {"torch": 10}, {"candidate": 100}, {"torch": 5}]
    w = round_windows(r, 20)
    assert [(a, b) for a, b, _ in w] == [(0, 1), (2, 3)]  # the short tail joins the last window
    assert w[0][2] == {"candidate": 10, "torch": 10} and w[1][2] == {"candidate": 100, "torch": 5}
    assert round_windows([], 20) == []
    assert round_windows([{"candidate": 3}], 20) == [(0, 0, {"candidate": 3})]


def test_foreign_verdict_pooled_still_applies():
    assert foreign_verdict({"candidate": 70, "torch": 20, "runtime": 10}, 0.25) is None
    assert foreign_verdict({"candidate": 60, "torch": 30, "runtime": 10}, 0.25)[0] == "torch_compute"


def test_torch_confined_to_some_rounds_is_not_diluted():
    # checked rounds padded with own work, torch in the other rounds: pooled 1000 torch / 5000 = 20 %
    checked = [{"candidate": 1000} for _ in range(4)]
    timed = [{"torch": 8, "runtime": 2} for _ in range(100)]
    rounds = checked + timed
    pooled = {"candidate": 4000, "torch": 800, "runtime": 200}
    assert (800) / 5000 <= 0.25
    v = foreign_verdict(pooled, 0.25, rounds=rounds)
    assert v is not None and v[0] == "torch_compute" and "in rounds" in v[1], v


def test_honest_noise_is_not_a_rejection():
    import random

    rng = random.Random(5)
    rounds = []
    for _ in range(800):  # 18 % torch (conversions), 8 samples a round: 100 windows, some over 25 % by chance
        n = 8
        t = sum(rng.random() < 0.18 for _ in range(n))
        rounds.append({"candidate": n - t, "torch": t})
    pooled = {k: sum(r.get(k, 0) for r in rounds) for k in ("candidate", "torch")}
    assert foreign_verdict(pooled, 0.25, rounds=rounds) is None


def test_one_big_round_over_the_share():
    rounds = [{"candidate": 100} for _ in range(30)] + [{"candidate": 100, "foreign": 300}]
    pooled = {"candidate": 3100, "foreign": 300}
    v = foreign_verdict(pooled, 0.25, rounds=rounds)
    assert v and v[0] == "foreign_compute" and "round 31 of 31" in v[1]


def test_window_verdict_degenerate():
    assert foreign_verdict({}, 0.25, rounds=[]) is None
    assert foreign_verdict({}, 0.25, rounds=[{}, {}]) is None
    assert foreign_verdict({"torch": 5}, 0.25, rounds=[{"torch": 5}]) is None  # too few samples to judge


# ----------------------------------------------------------------------------- candidate mappings


@pytest.fixture(scope="module")
def so(tmp_path_factory):
    d = tmp_path_factory.mktemp("attr")
    src = d / "k.c"
    src.write_text("float attr_k(float x) { return x * 2.0f + 1.0f; }\n")
    p = d / "k.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(p), str(src)], check=True)
    return str(p)


def _attr(path):
    st = os.stat(path)
    return perf.Attribution({(st.st_dev, st.st_ino)}, [path])


def _cat(a, addr):
    return a.category(os.getpid(), addr)


def test_exec_segments(so, tmp_path):
    segs = exec_segments(so)
    assert len(segs) == 1 and segs[0][0] % mmap.PAGESIZE == 0 and segs[0][1] > segs[0][0]
    (tmp_path / "x").write_bytes(b"not an elf")
    assert exec_segments(str(tmp_path / "x")) == [] and exec_segments(str(tmp_path / "missing")) == []


def test_loaded_candidate_text_is_candidate(so):
    lib = ctypes.CDLL(so)
    addr = ctypes.cast(lib.attr_k, ctypes.c_void_p).value
    a = _attr(so)
    a.add([])  # a batch starts from fresh maps
    assert _cat(a, addr)[0] == "candidate"
    assert not a.tampered


def _map_file(path, off, length, prot, flags=mmap.MAP_PRIVATE):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    try:
        p = libc.mmap(None, length, prot, flags, fd, off)
    finally:
        os.close(fd)
    assert p not in (None, ctypes.c_void_p(-1).value)
    return libc, p


def test_dirty_copy_on_write_text_is_foreign(so):
    ctypes.CDLL(so)
    lo, hi = exec_segments(so)[0]
    libc, p = _map_file(so, lo, hi - lo, mmap.PROT_READ | mmap.PROT_WRITE)
    a = _attr(so)
    try:
        ctypes.memset(p, 0x90, 16)  # a private copy: the file still names the candidate
        assert libc.mprotect(ctypes.c_void_p(p), hi - lo, mmap.PROT_READ | mmap.PROT_EXEC) == 0
        a.add([])
        cat, path = _cat(a, p)
        assert cat == "foreign" and "not a clean segment" in path
        assert any("not a clean segment" in k for k in a.tampered)  # its existence is a finding
    finally:
        libc.munmap(ctypes.c_void_p(p), hi - lo)


def test_candidate_data_mapped_executable_is_foreign(so, tmp_path):
    import shutil

    so = shutil.copy(so, tmp_path / "never_loaded.so")  # its only mapping is the one made here
    lo, hi = exec_segments(so)[0]
    size = os.path.getsize(so)
    off = hi if hi < size else 0  # a page outside the executable segment (data, headers)
    if off == lo:
        pytest.skip("no page outside the executable segment")
    libc, p = _map_file(so, off - off % mmap.PAGESIZE, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC)
    try:
        a = _attr(so)
        a.add([])
        assert _cat(a, p)[0] == "foreign"
    finally:
        libc.munmap(ctypes.c_void_p(p), mmap.PAGESIZE)


def test_extra_clean_mapping_of_the_text_makes_it_foreign(so):
    lib = ctypes.CDLL(so)
    addr = ctypes.cast(lib.attr_k, ctypes.c_void_p).value
    lo, hi = exec_segments(so)[0]
    libc, p = _map_file(so, lo, hi - lo, mmap.PROT_READ | mmap.PROT_EXEC)
    try:
        a = _attr(so)
        a.add([])
        assert _cat(a, p)[0] == "foreign" and _cat(a, addr)[0] == "foreign"
        assert any("extra mapping" in k for k in a.tampered)
    finally:
        libc.munmap(ctypes.c_void_p(p), hi - lo)
    a.add([])
    assert _cat(a, addr)[0] == "candidate"


# ----------------------------------------------------------------------------- fresh maps, cap, deadline


def test_maps_are_reread_at_every_batch(monkeypatch):
    """A range attributed as the candidate in one batch and remapped before the next is judged by the new
    mapping (the old cache kept a hit forever)."""
    a = perf.Attribution(set())
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    p = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    try:
        fake = {"n": 0}
        seen = []
        orig = a._read_maps

        def counting(pid):
            fake["n"] += 1
            starts, ranges = orig(pid)
            if fake["n"] == 1:  # the first read says the anonymous range is the candidate's
                ranges = [(lo, hi, "candidate" if lo == p else c, path) for lo, hi, c, path in ranges]
            return starts, ranges

        monkeypatch.setattr(a, "_read_maps", counting)
        pid = os.getpid()
        seen.append(a.add([(pid, pid, p)]))
        seen.append(a.add([(pid, pid, p)]))
        assert seen[0]["candidate"] == 1
        assert seen[1]["foreign"] == 1 and seen[1]["candidate"] == 0
        assert fake["n"] == 2 and a.rounds == seen
    finally:
        libc.munmap(ctypes.c_void_p(p), mmap.PAGESIZE)


def test_too_many_executable_mappings_is_a_finding(monkeypatch):
    monkeypatch.setattr(perf, "MAX_EXEC_MAPPINGS", 5)
    a = perf.Attribution(set())
    with pytest.raises(perf.AttributionLimit) as e:
        a.add([(os.getpid(), os.getpid(), 0x1000)])
    assert e.value.code == "too_many_mappings"


def test_attribution_past_the_deadline_is_a_timeout():
    a = perf.Attribution(set(), deadline=time.monotonic() - 1)
    pid = os.getpid()
    with pytest.raises(perf.AttributionLimit) as e:
        a.add([(pid, pid, 0x1000)] * 5000)
    assert e.value.code == "timeout"
    a = perf.Attribution(set(), deadline=time.monotonic() + 600)
    assert sum(a.add([(pid, pid, 0x1000)] * 5000).values()) == 5000


def test_copy_on_write_runtime_text_is_foreign():
    """Laundering through a runtime file instead of the candidate's: a private writable copy of libc's text,
    written and made executable, names libc but is not libc's code."""
    libc = ctypes.CDLL(None)
    path = next(l.split()[5] for l in open("/proc/self/maps") if l.split()[-1].endswith("/libc.so.6") and "r-xp" in l)
    off = next(int(l.split()[2], 16) for l in open("/proc/self/maps") if l.split()[-1] == path and "r-xp" in l)
    libc_, p = _map_file(path, off, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        ctypes.memmove(p, p, 64)  # a copy-on-write write of the same bytes
        assert libc_.mprotect(ctypes.c_void_p(p), mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) == 0
        a = perf.Attribution(set())
        a.add([])
        cat, name = _cat(a, p)
        assert cat == "foreign" and "not a clean mapping of a runtime file" in name
        assert any("runtime file" in k for k in a.tampered)
        assert _cat(a, ctypes.cast(libc.getpid, ctypes.c_void_p).value)[0] == "runtime"  # the loader's mapping
    finally:
        libc_.munmap(ctypes.c_void_p(p), mmap.PAGESIZE)
