"""Where the worker's on-CPU time goes, seen from the parent (stdlib only: ``perf_event_open`` via ctypes).

The parent opens one sampling event per CPU on the worker's first process with ``inherit``, before any
candidate code runs, so every thread and child the candidate starts later is sampled too: the kernel
records the interrupted instruction pointer every ``period_ns`` of on-CPU time (the software task clock;
no PMU needed). The events are the parent's file descriptors; the worker never holds them, and its seccomp
filter refuses ``prctl(PR_TASK_PERF_EVENTS_DISABLE)``. :class:`Attribution` maps every sampled address to
the file mapped there, read by the parent from ``/proc/<pid>/maps`` (the kernel's view, not the worker's
word): the candidate's own built extension (by device and inode), torch, the Python/C runtime, the kernel,
or anything else (another library, code in anonymous or tmpfs memory).

Three kinds of runtime code are judged by **who called them**, read from the sample's user registers and the top
of its stack (``PERF_SAMPLE_REGS_USER``/``STACK_USER``) with the library's own DWARF call-frame information
(:func:`unwind`): torch's bundled Sleef is runtime only when the candidate's code called it; libm/libmvec are
torch when torch's code called them (ATen's scalar kernels, the DEFAULT CPU capability), and a caller that cannot
be found counts as torch; libc is torch when torch's code called it (a copy through ``memcpy``). libm and libc
called by the interpreter's own code count with the interpreter's share (:data:`INTERP_CALLER`: a ``memoryview``
copy is libpython calling ``memcpy``). (x86-64 only, and only for a Sampler opened with ``stacks``, as the sandbox's is:
elsewhere no stack is sampled, Sleef stays torch and libm runtime.)
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import re
import struct
import subprocess
import sys
import time

SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine, -1)
PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK = 1, 1
PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER = 1, 2, 1 << 12, 1 << 13
# The caller of a sample in torch's Sleef is read from the sampled thread's user registers and the top of its stack
# (x86-64 only: bp and sp, perf's register bits 6 and 7, written in that order). Sleef's frames are small: in torch
# 2.13's libtorch_cpu the return address is at most 56 bytes above rsp where the CFA is rsp-based, and at most ~215
# (AVX2 variants) or ~375 bytes (AVX-512) where a function realigns its stack (CFA = rbp + 16); 384 bytes cover
# both. (Sleef's plain-AVX variants, used only on CPUs without AVX2, reach ~1 KB: a sample deeper than the copy
# has no caller and stays torch.) Each sample is ~450 bytes (24 without): the ring holds ~1,150 samples per CPU,
# ~58 ms of on-CPU time at 50 us; the worker's parent empties it every ~25 ms while a round runs.
UNWIND = os.uname().machine == "x86_64"
REGS_MASK = (1 << 6) | (1 << 7)
STACK_DUMP = 384
PERF_FLAG_FD_CLOEXEC = 8
PERF_RECORD_LOST, PERF_RECORD_SAMPLE = 2, 9
_REC = struct.Struct("<IHH")
_SAMPLE = struct.Struct("<QII")
PAGE = mmap.PAGESIZE


class PerfError(OSError):
    """perf_event_open is unavailable or refused here."""


class _Attr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
                ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
                ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
                ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
                ("sample_max_stack", ctypes.c_uint16), ("_r1", ctypes.c_uint16)]


_FLAG_INHERIT, _FLAG_EXCLUDE_HV = 1 << 1, 1 << 6
_libc = None


def _open(pid: int, cpu: int, period_ns: int, stacks: bool = False) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    a = _Attr()
    a.type, a.size, a.config = PERF_TYPE_SOFTWARE, ctypes.sizeof(_Attr), PERF_COUNT_SW_TASK_CLOCK
    a.sample_period, a.sample_type = period_ns, PERF_SAMPLE_IP | PERF_SAMPLE_TID
    if stacks:
        a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER
        a.sample_regs_user, a.sample_stack_user = REGS_MASK, STACK_DUMP
    a.flags = _FLAG_INHERIT | _FLAG_EXCLUDE_HV
    fd = _libc.syscall(SYS_PERF_EVENT_OPEN, ctypes.byref(a), pid, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        e = ctypes.get_errno()
        raise PerfError(e, f"perf_event_open(pid={pid}, cpu={cpu}): {os.strerror(e)}")
    return fd


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except OSError:
        return list(range(os.cpu_count() or 1))


class Sampler:
    """Sampling events on ``pid`` and its future descendants, one ring buffer per CPU."""

    def __init__(self, pid: int, period_ns: int = 50_000, pages: int = 128, cpus: list[int] | None = None,
                 stacks: bool = False):
        self.period_ns = period_ns
        self.stacks = stacks and UNWIND  # sample each thread's user bp, sp and stack top too (see STACK_DUMP)
        self.fds: list[int] = []
        self.maps: list[mmap.mmap] = []
        self.size = pages * PAGE
        self.lost = 0
        try:
            for cpu in (cpus if cpus is not None else _cpus()):
                fd = _open(pid, cpu, period_ns, self.stacks)
                self.fds.append(fd)
                self.maps.append(mmap.mmap(fd, (pages + 1) * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
        except BaseException:
            self.close()
            raise

    def drain(self) -> list[tuple]:
        """Every sample since the last drain: (pid, tid, ip), or with ``stacks`` (pid, tid, ip, frame): ``frame``
        is (sp, bp, the stack's top bytes from sp) for a sample in user code, else None (:func:`parse_sample`)."""
        out = []
        for m in self.maps:
            head = struct.unpack_from("<Q", m, 1024)[0]
            tail = struct.unpack_from("<Q", m, 1032)[0]
            pos = tail
            while pos + _REC.size <= head:
                typ, _, size = _REC.unpack(self._read(m, pos, _REC.size))
                if size < _REC.size:
                    break
                if typ == PERF_RECORD_SAMPLE and size >= _REC.size + _SAMPLE.size:
                    s = parse_sample(self._read(m, pos + _REC.size, size - _REC.size), self.stacks)
                    if s is not None:
                        out.append(s if self.stacks else s[:3])
                elif typ == PERF_RECORD_LOST:
                    self.lost += struct.unpack("<QQ", self._read(m, pos + _REC.size, 16))[1]
                pos += size
            struct.pack_into("<Q", m, 1032, head)
        return out

    def _read(self, m: mmap.mmap, pos: int, n: int) -> bytes:
        off = PAGE + pos % self.size
        if off + n <= PAGE + self.size:
            return m[off:off + n]
        first = PAGE + self.size - off
        return m[off:PAGE + self.size] + m[PAGE:PAGE + n - first]

    def close(self) -> None:
        for m in self.maps:
            m.close()
        for fd in self.fds:
            os.close(fd)
        self.maps, self.fds = [], []


def parse_sample(body: bytes, unwind: bool) -> tuple | None:
    """Pure: (pid, tid, ip, frame) of a PERF_RECORD_SAMPLE's body (after its header), in the kernel's order for
    our sample_type: u64 ip; u32 pid, tid; then, if ``unwind``, REGS_USER (u64 abi; u64 bp, sp if abi != 0)
    and STACK_USER (u64 size; char data[size]; u64 dyn_size if size != 0; dyn_size bytes of data are the stack).
    ``frame``: (sp, bp, stack bytes) or None (no user registers: a kernel thread; a short record; a kernel ip)."""
    if len(body) < _SAMPLE.size:
        return None
    ip, pid, tid = _SAMPLE.unpack_from(body, 0)
    frame = None
    if unwind and len(body) >= 24 and ip < KERNEL_IP:
        abi, = struct.unpack_from("<Q", body, 16)
        j = 24
        regs = None
        if abi:
            if len(body) < j + 16:
                return pid, tid, ip, None
            regs = struct.unpack_from("<QQ", body, j)
            j += 16
        if len(body) >= j + 8:
            size, = struct.unpack_from("<Q", body, j)
            j += 8
            if size and len(body) >= j + size + 8 and regs is not None:
                dyn, = struct.unpack_from("<Q", body, j + size)
                frame = (regs[1], regs[0], bytes(body[j:j + min(dyn, size)]))
    return pid, tid, ip, frame


def problem() -> str:
    """'' where the parent can sample a child's instruction pointers here, else why not."""
    pid = os.fork()
    if pid == 0:
        import time

        time.sleep(5)
        os._exit(0)
    try:
        Sampler(pid, pages=1).close()
        return ""
    except (PerfError, OSError) as e:
        return f"perf_event_open sampling refused ({e})"
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


# ----------------------------------------------------------------------------- attribution

CATEGORIES = ("candidate", "torch", "runtime", "kernel", "foreign")
TORCH_RUNTIME_LIB = "libtorch_cpu.so"  # holds Sleef and the fill kernel (torchsyms)
KERNEL_IP = 0xFFFF800000000000
MAX_EXEC_MAPPINGS = 4096  # executable mappings read per process; more is a finding (a process with torch has ~200)
# The runtime by exact identity: system libraries by their exact sonames (no prefixes: "libcrypt" must not match
# libcrypto), only from the system's library directories; the interpreter and libpython; and the few stdlib
# extension modules the worker's own plumbing and ctypes calls run through. Everything else (compression, crypto,
# other stdlib extension modules such as audioop or _decimal) is foreign.
_RUNTIME_SONAME = re.compile(r"(libc\.so\.6|libc-2\.\d+\.so|libm\.so\.6|libm-2\.\d+\.so|libmvec\.so\.1|libmvec-2\.\d+\.so"
                             r"|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1|ld-2\.\d+\.so|libgcc_s\.so\.1"
                             r"|libstdc\+\+\.so\.6(\.0\.\d+)?|libgomp\.so\.1(\.0\.0)?|libpthread\.so\.0|libpthread-2\.\d+\.so"
                             r"|libdl\.so\.2|libdl-2\.\d+\.so|librt\.so\.1|librt-2\.\d+\.so|libffi\.so\.[678](\.\d+)*)")
_SYSTEM_LIB_DIRS = ("/usr/lib/", "/lib/", "/usr/lib64/", "/lib64/")
# the math libraries, runtime only where torch's code did not call them (ATen's scalar kernels call libm)
_MATH_SONAME = re.compile(r"libm\.so\.6|libm-2\.\d+\.so|libmvec\.so\.1|libmvec-2\.\d+\.so")
# libc, judged by its caller too: torch's code -> torch (a copy_ or a fill through memcpy/memset), the
# interpreter's -> the interpreter's share (a memoryview or bytes copy is libpython calling memcpy)
_LIBC_SONAME = re.compile(r"libc\.so\.6|libc-2\.\d+\.so")
INTERP_CALLER = " [called by the interpreter]"  # a runtime sample's path suffix: counted with the interpreter's
_CFI: dict[tuple, tuple] = {}  # (path, dev, inode, mtime, size) -> (exec loads, row starts, rows): the parent's files
_TORCH_GOMP = re.compile(r"libgomp(-[0-9a-f]+)?\.so\.1(\.0\.0)?")
_INTERPRETER = re.compile(r"bin/python3(\.\d+)?|lib/libpython3\.\d+\.so(\.1\.0)?")
_DYNLOAD_RUNTIME = frozenset(("_ctypes", "_socket", "select", "fcntl", "mmap", "_posixshmem", "_posixsubprocess", "_json",
                              "_pickle", "_struct", "_contextvars", "_opcode", "_typing", "_queue"))


_LIBFFI = re.compile(r"libffi\.so\.[678](\.\d+)*")


def interpreter_path(path: str, python_dirs: tuple[str, ...]) -> bool:
    """Pure: whether a runtime mapping is the interpreter's own code: the python binary and libpython, the stdlib
    modules of the worker's plumbing and ctypes calls (``_ctypes``, ``_struct``, ...) and libffi. Its samples are
    runtime up to what the eager party's interpreter spends per round (:func:`evaluate.foreign_verdict`): the
    interpreter's builtins (bignums, bytes, struct) are compute like any library's."""
    name = os.path.basename(path)
    if _LIBFFI.fullmatch(name) and path.startswith(_SYSTEM_LIB_DIRS):
        return True
    for d in python_dirs:
        if path.startswith(d):
            rel = path[len(d):]
            if _INTERPRETER.fullmatch(rel) or (os.path.basename(os.path.dirname(rel)) == "lib-dynload"
                                               and name.split(".", 1)[0] in _DYNLOAD_RUNTIME):
                return True
    return False


def _cfi_table(path: str) -> tuple:
    """(exec loads, row starts, rows) of a runtime library's call-frame information, read once per file
    version in this process (libc's ~25,000 rows take ~0.2 s to parse); an unreadable file has no rows."""
    from shiftkit.kernels import torchsyms

    try:
        st = os.stat(path)
    except OSError:
        return ([], [], [])
    key = (path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    t = _CFI.get(key)
    if t is None:
        try:
            rows = torchsyms.unwind_rows_from_file(path, [(0, 1 << 63)])
        except (OSError, ValueError, IndexError, struct.error):
            rows = []
        t = _CFI[key] = (exec_loads(path), [r[0] for r in rows], rows)
    return t


def classify_path(path: str, candidate: bool, torch_dirs: tuple[str, ...], python_dirs: tuple[str, ...]) -> str:
    """Pure: the category of an executable mapping (``candidate``: it is one of the built extensions, as a clean
    mapping of one of its executable segments; see :meth:`Attribution._read_maps`)."""
    if candidate:
        return "candidate"
    if path in ("[vdso]", "[vsyscall]"):
        return "runtime"
    name = os.path.basename(path)
    if path.startswith(torch_dirs):
        return "runtime" if _TORCH_GOMP.fullmatch(name) else "torch"
    if _RUNTIME_SONAME.fullmatch(name) and path.startswith(_SYSTEM_LIB_DIRS):
        return "runtime"
    return "runtime" if interpreter_path(path, python_dirs) else "foreign"


def lookup(starts: list[int], ranges: list[tuple[int, int, str, str]], ip: int) -> tuple[str, str]:
    """Pure: (category, path) of the range holding ``ip``; ``ranges`` sorted by start and non-overlapping,
    ``starts`` their starts. O(log n) (a process may hold tens of thousands of mappings)."""
    i = bisect.bisect_right(starts, ip) - 1
    if i >= 0 and ranges[i][0] <= ip < ranges[i][1]:
        return ranges[i][2], ranges[i][3]
    return "foreign", "[unmapped]"


def exec_segments(path: str) -> list[tuple[int, int]]:
    """The page-aligned file ranges [start, end) of an ELF file's executable PT_LOAD segments ([] if unreadable
    or not a 64-bit little-endian ELF)."""
    return [(off & ~(PAGE - 1), (off + size + PAGE - 1) & ~(PAGE - 1)) for off, _, size in exec_loads(path)]


def exec_loads(path: str) -> list[tuple[int, int, int]]:
    """(p_offset, p_vaddr, p_filesz) of an ELF file's executable PT_LOAD segments ([] if unreadable or not a
    64-bit little-endian ELF)."""
    try:
        with open(path, "rb") as f:
            h = f.read(64)
            if len(h) < 64 or h[:4] != b"\x7fELF" or h[4] != 2 or h[5] != 1:
                return []
            phoff, = struct.unpack_from("<Q", h, 32)
            phentsize, phnum = struct.unpack_from("<HH", h, 54)
            if phentsize < 56 or phnum > 4096:
                return []
            f.seek(phoff)
            ph = f.read(phentsize * phnum)
    except OSError:
        return []
    out = []
    for k in range(len(ph) // phentsize):
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", ph, k * phentsize)
        if p_type == 1 and p_flags & 1 and p_filesz:
            out.append((p_offset, p_vaddr, p_filesz))
    return out


def file_vaddr(loads: list[tuple[int, int, int]], file_off: int) -> int | None:
    """Pure: the link-time virtual address of byte ``file_off`` of an ELF file, from its executable PT_LOAD
    segments ``(p_offset, p_vaddr, p_filesz)``; None outside them."""
    for off, vaddr, size in loads:
        if off <= file_off < off + size:
            return vaddr + file_off - off
    return None


def clean_file_pages(pid: int, lo: int, hi: int) -> bool:
    """True if no page of [lo, hi) in ``pid`` is anonymous (a copy-on-write copy, written or swapped): every
    resident page is the file's own page cache (:func:`shm.pagemap_entries`). Unreadable: False (fail closed)."""
    from shiftkit.kernels.shm import PM_FILE, PM_PRESENT, PM_SWAPPED, pagemap_entries

    n = (hi - lo) // PAGE
    try:
        entries = pagemap_entries(pid, lo // PAGE, n)
    except (OSError, OverflowError, ValueError):
        return False
    return len(entries) == n and not any(e & (PM_PRESENT | PM_SWAPPED) and not e & PM_FILE for e in entries)


NO_STACK = ()  # a sample from a Sampler without ``stacks``: no caller rule applies (libm stays runtime, Sleef torch)


def _within(starts: list[int], ranges: list[tuple], v: int | None) -> bool:
    i = bisect.bisect_right(starts, v) - 1 if v is not None else -1
    return i >= 0 and ranges[i][0] <= v < ranges[i][1]


UNWIND_FRAMES = 4  # Sleef frames followed up the stack (a Sleef entry point may call another Sleef function)
DW_RSP, DW_RBP = 7, 6


def unwind(ip: int, sp: int, bp: int, stack: bytes, rule, still_inside) -> int | None:
    """Pure: the first return address out of the runtime code, read from a sampled stack with the library's
    call-frame information. ``stack``: the thread's stack from ``sp`` up, as the kernel copied it at the sample;
    ``rule(addr, first)``: the unwind row (lo, hi, cfa_reg, cfa_off, ra_off, bp_off) at ``addr`` (the sampled
    ``ip`` if ``first``, else a return address), or None; ``still_inside(ra)``: the return address is in the
    runtime code again (then one more frame is unwound). None where the unwind fails: no row, a word needed
    outside the copied stack, or more than :data:`UNWIND_FRAMES` frames."""
    base = sp
    first = True
    for _ in range(UNWIND_FRAMES):
        r = rule(ip, first)
        if r is None:
            return None
        _, _, reg, off, ra_off, bp_off = r
        cfa = sp if reg == DW_RSP else bp if reg == DW_RBP else None
        if cfa is None:  # another register, or an rbp an earlier frame could not restore
            return None
        cfa += off

        def word(addr: int) -> int | None:
            k = addr - base
            return struct.unpack_from("<Q", stack, k)[0] if 0 <= k and k + 8 <= len(stack) else None

        ra = word(cfa + ra_off)
        if ra is None:
            return None
        if bp_off is not None:
            bp = word(cfa + bp_off)  # None if outside the copy: needed only if a later frame's CFA is rbp-based
        if not still_inside(ra):
            return ra
        ip, sp, first = ra, cfa, False
    return None


class AttributionLimit(Exception):
    """The worker's mappings cannot be attributed within the limits: ``code`` is the finding."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message, self.log_tail, self.violations = code, message, "", {}


class Attribution:
    """Counts samples per category for one worker tree. ``candidate_files``: (dev, inode) of its built .so;
    ``candidate_paths``: those files (the parent's copies, read for their executable segments);
    ``deadline``: a time.monotonic() past which attributing raises a timeout."""

    def __init__(self, candidate_files: set[tuple[int, int]], candidate_paths: list[str] = (),
                 deadline: float | None = None):
        import torch

        self.candidate_files = candidate_files
        self.segments: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for p in candidate_paths:
            try:
                st = os.stat(p)
            except OSError:
                continue
            self.segments[(st.st_dev, st.st_ino)] = exec_segments(p)
        self.deadline = deadline
        tdir = os.path.dirname(os.path.realpath(torch.__file__))
        self.torch_dirs = (tdir + "/", os.path.realpath(os.path.join(tdir, "..", "torch.libs")) + "/")
        self.python_dirs = tuple(sorted({os.path.realpath(p) + "/" for p in (sys.base_prefix, sys.base_exec_prefix)}))
        self._maps: dict[int, tuple[list[int], list[tuple[int, int, str, str]]]] = {}
        self._torch_exec: dict[int, list[tuple[int, int, int, str]]] = {}  # per pid: libtorch_cpu's code mappings
        self._math_exec: dict[int, list[tuple[int, int, int, str]]] = {}  # per pid: libm's and libmvec's
        self._math_cfi: dict[str, tuple] = {}  # libm path -> (exec loads, row starts, rows)
        self._clean: dict[tuple[int, int], bool] = {}  # (pid, page) -> clean file page, this batch
        self._torch_runtime: dict[str, tuple] = {}  # libtorch_cpu path -> (exec loads, range starts, ranges, ...)
        # Sleef samples by how their caller was found: the candidate's code (runtime), other code (torch), or
        # not found (no unwind row, a stack copy too short, no registers: torch)
        self.sleef_callers = {"candidate": 0, "other": 0, "failed": 0}
        # libm/libmvec samples by their caller: torch's code (torch: ATen's scalar kernels call libm), the
        # interpreter's (runtime, counted with the interpreter's share), other code (runtime), not found (torch)
        self.math_callers = {"torch": 0, "interp": 0, "other": 0, "failed": 0}
        # libc samples by their caller: the same, but not found stays runtime (libc's leaf routines always unwind;
        # a candidate's own memcpy must not turn into torch on a short stack copy)
        self.libc_callers = {"torch": 0, "interp": 0, "other": 0, "failed": 0}
        self.counts = dict.fromkeys(CATEGORIES, 0)
        self.rounds: list[dict[str, int]] = []  # each kept batch's counts, in order (one per round)
        self.interp: list[int] = []  # each kept batch's runtime samples in the interpreter's own code (a subset)
        self._interp_paths: dict[str, bool] = {}
        self.foreign_files: dict[str, int] = {}
        self.tampered: dict[str, int] = {}  # candidate-file mappings that failed the check: how many freezes saw each

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise AttributionLimit("timeout", "the evaluation's wall-clock budget ran out while attributing the "
                                   "worker's samples")

    def _read_maps(self, pid: int) -> tuple[list[int], list[tuple[int, int, str, str]]]:
        """The executable mappings of ``pid`` now (the tree is frozen), sorted, with their categories. A mapping
        of a candidate file counts as candidate only if it lies within one of the file's executable PT_LOAD
        segments, holds no anonymous (copy-on-write) page, and the file has no more such mappings than
        executable segments; otherwise it is foreign whatever file it names. A runtime file's mapping (libc, the
        interpreter, the vDSO, ...) that is writable or holds an anonymous page is foreign too. Every such mapping
        is recorded in :attr:`tampered` (the loader never makes one)."""
        out: list[tuple[int, int, str, str]] = []
        cand: dict[tuple[int, int], list[int]] = {}
        try:
            with open(f"/proc/{pid}/maps") as f:
                for k, line in enumerate(f):
                    if k & 1023 == 1023:
                        self._check_deadline()
                    parts = line.split(None, 5)
                    if len(parts) < 5 or "x" not in parts[1]:
                        continue
                    if len(out) >= MAX_EXEC_MAPPINGS:
                        raise AttributionLimit("too_many_mappings", f"the worker holds more than {MAX_EXEC_MAPPINGS} "
                                               "executable mappings; its samples cannot be attributed")
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    path = parts[5].strip() if len(parts) > 5 else ""
                    if not path:
                        out.append((lo, hi, "foreign", "[anonymous]"))
                        continue
                    dev = parts[3].split(":")
                    key = (os.makedev(int(dev[0], 16), int(dev[1], 16)), int(parts[4]))
                    if key in self.candidate_files and key[1] != 0:
                        off = int(parts[2], 16)
                        segs = self.segments.get(key, ())
                        ok = (parts[1][3] == "p" and "w" not in parts[1]
                              and any(s <= off and off + (hi - lo) <= e for s, e in segs)
                              and clean_file_pages(pid, lo, hi))
                        if ok:
                            cand.setdefault(key, []).append(len(out))
                        out.append((lo, hi, "candidate" if ok else "foreign",
                                    path if ok else f"[not a clean segment of the candidate] {path}"))
                        continue
                    cat = classify_path(path, False, self.torch_dirs, self.python_dirs)
                    if cat == "torch" and os.path.basename(path) == TORCH_RUNTIME_LIB and "w" not in parts[1]:
                        self._torch_exec.setdefault(pid, []).append((lo, hi, int(parts[2], 16), path))
                    if (cat == "runtime" and path != "[vsyscall]"
                            and ("w" in parts[1] or not clean_file_pages(pid, lo, hi))):
                        cat, path = "foreign", f"[not a clean mapping of a runtime file] {path}"
                    if cat == "runtime" and (_MATH_SONAME.fullmatch(os.path.basename(path))
                                             or _LIBC_SONAME.fullmatch(os.path.basename(path))):
                        self._math_exec.setdefault(pid, []).append((lo, hi, int(parts[2], 16), path))
                    out.append((lo, hi, cat, path))
        except AttributionLimit:
            raise
        except (OSError, ValueError, IndexError):
            pass
        for key, idx in cand.items():
            if len(idx) > len(self.segments.get(key, ())):
                for i in idx:
                    lo, hi, _, path = out[i]
                    out[i] = (lo, hi, "foreign", f"[extra mapping of the candidate] {path}")
        for r in out:
            if r[3].startswith(("[not a clean segment of the candidate] ", "[extra mapping of the candidate] ",
                                "[not a clean mapping of a runtime file] ")):
                self.tampered[r[3]] = self.tampered.get(r[3], 0) + 1
        out.sort()
        return [r[0] for r in out], out

    def category(self, pid: int, ip: int, frame: tuple | None = NO_STACK) -> tuple[str, str]:
        """The category of ``ip`` in ``pid``, from the maps read at this batch (see :meth:`add`); ``frame``:
        the sample's (sp, bp, stack bytes), read to find the caller of a sample in Sleef or libm; None: the
        sample has none (its caller is not found); NO_STACK: stacks were not sampled."""
        if ip >= KERNEL_IP:
            return "kernel", ""
        m = self._maps.get(pid)
        if m is None:
            m = self._maps[pid] = self._read_maps(pid)
        cat, path = lookup(m[0], m[1], ip)
        if frame is not NO_STACK and cat == "runtime" and any(lo <= ip < hi for lo, hi, _, _ in self._math_exec.get(pid, ())):
            caller = self._math_caller(pid, ip, frame)
            libc = _LIBC_SONAME.fullmatch(os.path.basename(path)) is not None
            (self.libc_callers if libc else self.math_callers)[caller] += 1
            if caller == "torch":
                return "torch", f"{path} [called by torch]"
            if caller == "interp":
                return cat, path + INTERP_CALLER
            if caller == "failed" and not libc:
                return "torch", f"{path} [caller not found]"
            return cat, path
        if cat == "torch":
            kind = self._torch_runtime_code(pid, ip)
            if kind == "fill":
                return "runtime", f"{path} [fill kernel]"
            if kind == "sleef":
                caller = self._sleef_caller(pid, ip, frame)
                self.sleef_callers[caller] += 1
                if caller == "candidate":
                    return "runtime", f"{path} [Sleef called by the candidate]"
                return "torch", f"{path} [Sleef called by torch]" if caller == "other" else f"{path} [Sleef, caller not found]"
        return cat, path

    def _torch_table(self, path: str) -> tuple:
        t = self._torch_runtime.get(path)
        if t is None:
            from shiftkit.kernels import torchsyms

            try:
                tab = torchsyms.library_table(path)
                ranges, sleef, rows = tab["runtime"], tab["sleef"], tab["unwind"]
            except (OSError, subprocess.SubprocessError):
                ranges, sleef, rows = [], [], []  # unreadable: torch's code stays torch (fails towards rejection)
            t = self._torch_runtime[path] = (exec_loads(path), [r[0] for r in ranges], ranges,
                                             [r[0] for r in sleef], sleef, [r[0] for r in rows], rows)
        return t

    def _torch_code(self, pid: int, ip: int) -> tuple | None:
        """(table, link-time address) of ``ip`` in a read-only mapping of libtorch_cpu, else None."""
        for lo, hi, off, path in self._torch_exec.get(pid, ()):
            if lo <= ip < hi:
                t = self._torch_table(path)
                v = file_vaddr(t[0], ip - lo + off)
                return (t, v) if v is not None else None
        return None

    def _torch_runtime_code(self, pid: int, ip: int) -> str | None:
        """"sleef" or "fill" where ``ip`` lies in torch's own runtime code (:mod:`torchsyms`), in a clean
        (unmodified, file-backed) page of a read-only mapping of libtorch_cpu; else None."""
        c = self._torch_code(pid, ip)
        if c is None:
            return None
        t, v = c
        if not _within(t[1], t[2], v):
            return None
        page = ip & ~(PAGE - 1)
        if (pid, page) not in self._clean:
            self._clean[(pid, page)] = clean_file_pages(pid, page, page + PAGE)
        if not self._clean[(pid, page)]:
            return None
        return "sleef" if _within(t[3], t[4], v) else "fill"

    def _sleef_caller(self, pid: int, ip: int, frame: tuple | None) -> str:
        """Who called the Sleef function holding ``ip``: "candidate" (a return address in the candidate's clean
        code, through at most :data:`UNWIND_FRAMES` Sleef frames), "other", or "failed" (see :func:`unwind`)."""
        if not frame:
            return "failed"
        sp, bp, stack = frame

        def rule(addr: int, first: bool) -> tuple | None:
            c = self._torch_code(pid, addr if first else addr - 1)  # a return address: the call is just before it
            if c is None:
                return None
            t, v = c
            i = bisect.bisect_right(t[5], v) - 1
            return t[6][i] if i >= 0 and t[6][i][0] <= v < t[6][i][1] else None

        ra = unwind(ip, sp, bp, stack, rule, lambda a: self._is_sleef(pid, a))
        if ra is None:
            return "failed"
        m = self._maps[pid]
        return "candidate" if lookup(m[0], m[1], ra - 1)[0] == "candidate" else "other"

    def _math_code(self, pid: int, addr: int) -> tuple | None:
        for lo, hi, off, path in self._math_exec.get(pid, ()):
            if lo <= addr < hi:
                t = self._math_cfi.get(path)
                if t is None:
                    t = self._math_cfi[path] = _cfi_table(path)
                v = file_vaddr(t[0], addr - lo + off)
                return (t, v) if v is not None else None
        return None

    def _math_caller(self, pid: int, ip: int, frame: tuple | None) -> str:
        """Who called the libm/libmvec/libc function holding ``ip``: "torch" (a return address in torch's code,
        its runtime code excepted), "interp" (the interpreter's own code, :func:`interpreter_path`), "other" (the
        candidate's or the rest of the runtime's code: libstdc++, libgomp), or "failed" (no unwind, see
        :func:`unwind`; or a return address anywhere else)."""
        if frame is None:
            return "failed"
        sp, bp, stack = frame

        def rule(addr: int, first: bool) -> tuple | None:
            c = self._math_code(pid, addr if first else addr - 1)
            if c is None:
                return None
            (_, starts, rows), v = c
            i = bisect.bisect_right(starts, v) - 1
            return rows[i] if i >= 0 and rows[i][0] <= v < rows[i][1] else None

        ra = unwind(ip, sp, bp, stack, rule, lambda a: self._math_code(pid, a - 1) is not None)
        if ra is None:
            return "failed"
        m = self._maps[pid]
        cat, where = lookup(m[0], m[1], ra - 1)
        if cat == "torch" and self._torch_runtime_code(pid, ra - 1) is None:
            return "torch"
        if cat == "runtime" and self._is_interp(where):
            return "interp"
        # runtime only for a caller positively found in the candidate's or the runtime's code; a return address
        # in unmapped or foreign memory (a wrong unwind, or foreign code, judged with torch anyway) is not
        return "other" if cat in ("candidate", "runtime") else "failed"

    def _is_interp(self, path: str) -> bool:
        known = self._interp_paths.get(path)
        if known is None:
            known = self._interp_paths[path] = interpreter_path(path, self.python_dirs)
        return known

    def _is_sleef(self, pid: int, addr: int) -> bool:
        return self._torch_runtime_code(pid, addr - 1) == "sleef"

    def add(self, samples: list[tuple[int, int, int]], keep: bool = True) -> dict[str, int]:
        """Attribute samples (taken while the tree is frozen, so its mappings are as they were); returns
        this batch's counts (added to the totals and to :attr:`rounds` if ``keep``). The maps are read afresh
        for every batch: nothing read at an earlier freeze is reused."""
        self._maps, self._torch_exec, self._math_exec, self._clean = {}, {}, {}, {}
        batch = dict.fromkeys(CATEGORIES, 0)
        interp = 0
        for k, s in enumerate(samples):
            if k & 4095 == 4095:
                self._check_deadline()
            cat, path = self.category(s[0], s[2], s[3] if len(s) > 3 else NO_STACK)
            batch[cat] += 1
            if cat == "runtime":
                interp += path.endswith(INTERP_CALLER) or self._is_interp(path)
            if cat == "foreign" and keep:
                self.foreign_files[path] = self.foreign_files.get(path, 0) + 1
        self._maps, self._torch_exec, self._math_exec, self._clean = {}, {}, {}, {}
        if keep:
            for k, v in batch.items():
                self.counts[k] += v
            self.rounds.append(dict(batch))
            self.interp.append(interp)
        return batch
