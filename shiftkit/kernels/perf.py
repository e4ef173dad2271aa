"""Where the worker's on-CPU time goes, seen from the parent (stdlib only: ``perf_event_open`` via ctypes).

The parent opens one sampling event per CPU on the worker's first process with ``inherit``, before any
candidate code runs, so every thread and child the candidate starts later is sampled too: the kernel
records the interrupted instruction pointer every ``period_ns`` of on-CPU time (the software task clock;
no PMU needed). The events are the parent's file descriptors; the worker never holds them, and its seccomp
filter refuses ``prctl(PR_TASK_PERF_EVENTS_DISABLE)``. :class:`Attribution` maps every sampled address to
the file mapped there, read by the parent from ``/proc/<pid>/maps`` (the kernel's view, not the worker's
word): the candidate's own built extension (by device and inode), torch, the Python/C runtime, the kernel,
or anything else (another library, code in anonymous or tmpfs memory).
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
PERF_SAMPLE_IP, PERF_SAMPLE_TID = 1, 2
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


def _open(pid: int, cpu: int, period_ns: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    a = _Attr()
    a.type, a.size, a.config = PERF_TYPE_SOFTWARE, ctypes.sizeof(_Attr), PERF_COUNT_SW_TASK_CLOCK
    a.sample_period, a.sample_type = period_ns, PERF_SAMPLE_IP | PERF_SAMPLE_TID
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

    def __init__(self, pid: int, period_ns: int = 50_000, pages: int = 128, cpus: list[int] | None = None):
        self.period_ns = period_ns
        self.fds: list[int] = []
        self.maps: list[mmap.mmap] = []
        self.size = pages * PAGE
        self.lost = 0
        try:
            for cpu in (cpus if cpus is not None else _cpus()):
                fd = _open(pid, cpu, period_ns)
                self.fds.append(fd)
                self.maps.append(mmap.mmap(fd, (pages + 1) * PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
        except BaseException:
            self.close()
            raise

    def drain(self) -> list[tuple[int, int, int]]:
        """Every sample since the last drain: (pid, tid, ip)."""
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
                    ip, pid, tid = _SAMPLE.unpack(self._read(m, pos + _REC.size, _SAMPLE.size))
                    out.append((pid, tid, ip))
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
_TORCH_GOMP = re.compile(r"libgomp(-[0-9a-f]+)?\.so\.1(\.0\.0)?")
_INTERPRETER = re.compile(r"bin/python3(\.\d+)?|lib/libpython3\.\d+\.so(\.1\.0)?")
_DYNLOAD_RUNTIME = frozenset(("_ctypes", "_socket", "select", "fcntl", "mmap", "_posixshmem", "_posixsubprocess", "_json",
                              "_pickle", "_struct", "_contextvars", "_opcode", "_typing", "_queue"))


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
    for d in python_dirs:
        if path.startswith(d):
            rel = path[len(d):]
            if _INTERPRETER.fullmatch(rel):
                return "runtime"  # the interpreter and libpython
            parent = os.path.basename(os.path.dirname(rel))
            if parent == "lib-dynload" and name.split(".", 1)[0] in _DYNLOAD_RUNTIME:
                return "runtime"
    return "foreign"


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
    resident page is the file's own page cache. Read from /proc/pid/pagemap (bit 61: file page or shared
    anonymous; bit 62: swapped; bit 63: present). Unreadable: False (fail closed)."""
    n = (hi - lo) // PAGE
    try:
        with open(f"/proc/{pid}/pagemap", "rb") as f:
            f.seek(lo // PAGE * 8)
            data = f.read(8 * n)
    except (OSError, OverflowError, ValueError):
        return False
    if len(data) != 8 * n:
        return False
    for (e,) in struct.iter_unpack("<Q", data):
        if e >> 62 and not e >> 61 & 1:  # present or swapped, and not a file page
            return False
    return True


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
        self._clean: dict[tuple[int, int], bool] = {}  # (pid, page) -> clean file page, this batch
        self._torch_runtime: dict[str, tuple] = {}  # libtorch_cpu path -> (exec loads, range starts, ranges)
        self.counts = dict.fromkeys(CATEGORIES, 0)
        self.rounds: list[dict[str, int]] = []  # each kept batch's counts, in order (one per round)
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

    def category(self, pid: int, ip: int) -> tuple[str, str]:
        """The category of ``ip`` in ``pid``, from the maps read at this batch (see :meth:`add`)."""
        if ip >= KERNEL_IP:
            return "kernel", ""
        m = self._maps.get(pid)
        if m is None:
            m = self._maps[pid] = self._read_maps(pid)
        cat, path = lookup(m[0], m[1], ip)
        if cat == "torch" and self._torch_runtime_code(pid, ip):
            return "runtime", f"{path} [Sleef / fill kernel]"
        return cat, path

    def _torch_runtime_code(self, pid: int, ip: int) -> bool:
        """``ip`` lies in torch's own runtime code (Sleef, the fill kernel: :mod:`torchsyms`), in a clean
        (unmodified, file-backed) page of a read-only mapping of libtorch_cpu."""
        for lo, hi, off, path in self._torch_exec.get(pid, ()):
            if lo <= ip < hi:
                break
        else:
            return False
        t = self._torch_runtime.get(path)
        if t is None:
            from shiftkit.kernels import torchsyms

            try:
                ranges = torchsyms.runtime_ranges(path)
            except (OSError, subprocess.SubprocessError):
                ranges = []  # unreadable: torch's code stays torch (fails towards rejection, never open)
            t = self._torch_runtime[path] = (exec_loads(path), [r[0] for r in ranges], ranges)
        loads, starts, ranges = t
        v = file_vaddr(loads, ip - lo + off)
        i = bisect.bisect_right(starts, v) - 1 if v is not None else -1
        if i < 0 or not ranges[i][0] <= v < ranges[i][1]:
            return False
        page = ip & ~(PAGE - 1)
        if (pid, page) not in self._clean:
            self._clean[(pid, page)] = clean_file_pages(pid, page, page + PAGE)
        return self._clean[(pid, page)]

    def add(self, samples: list[tuple[int, int, int]], keep: bool = True) -> dict[str, int]:
        """Attribute samples (taken while the tree is frozen, so its mappings are as they were); returns
        this batch's counts (added to the totals and to :attr:`rounds` if ``keep``). The maps are read afresh
        for every batch: nothing read at an earlier freeze is reused."""
        self._maps, self._torch_exec, self._clean = {}, {}, {}
        batch = dict.fromkeys(CATEGORIES, 0)
        for k, (pid, _, ip) in enumerate(samples):
            if k & 4095 == 4095:
                self._check_deadline()
            cat, path = self.category(pid, ip)
            batch[cat] += 1
            if cat == "foreign" and keep:
                self.foreign_files[path] = self.foreign_files.get(path, 0) + 1
        self._maps, self._torch_exec, self._clean = {}, {}, {}
        if keep:
            for k, v in batch.items():
                self.counts[k] += v
            self.rounds.append(dict(batch))
        return batch
