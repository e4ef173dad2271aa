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

import ctypes
import mmap
import os
import struct
import sys

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
KERNEL_IP = 0xFFFF800000000000
_RUNTIME_LIBS = ("libc.so", "libc-", "libm.so", "libm-", "libmvec", "ld-linux", "libgcc_s", "libstdc++", "libgomp",
                 "libffi", "libpthread", "libdl.so", "librt.so", "libutil", "libz.so", "libbz2", "liblzma", "libexpat",
                 "libuuid", "libcrypt", "libtinfo", "libreadline", "libncurses", "libnss", "libresolv")


def classify_path(path: str, candidate: bool, torch_dirs: tuple[str, ...], python_dirs: tuple[str, ...]) -> str:
    """Pure: the category of an executable mapping (``candidate``: it is one of the built extensions)."""
    if candidate:
        return "candidate"
    if path in ("[vdso]", "[vsyscall]"):
        return "runtime"
    name = os.path.basename(path)
    if path.startswith(torch_dirs):
        return "runtime" if name.startswith("libgomp") else "torch"
    if name.startswith(_RUNTIME_LIBS) and path.startswith(("/usr/lib", "/lib", *python_dirs)):
        return "runtime"
    if path.startswith(python_dirs) and "site-packages" not in path:
        return "runtime"  # the interpreter, libpython and the standard library's extension modules
    return "foreign"


class Attribution:
    """Counts samples per category for one worker tree. ``candidate_files``: (dev, inode) of its built .so."""

    def __init__(self, candidate_files: set[tuple[int, int]]):
        import torch

        self.candidate_files = candidate_files
        tdir = os.path.dirname(os.path.realpath(torch.__file__))
        self.torch_dirs = (tdir + "/", os.path.realpath(os.path.join(tdir, "..", "torch.libs")) + "/")
        self.python_dirs = tuple(sorted({os.path.realpath(p) + "/" for p in (sys.base_prefix, sys.base_exec_prefix)}))
        self._maps: dict[int, list[tuple[int, int, str]]] = {}
        self.counts = dict.fromkeys(CATEGORIES, 0)
        self.foreign_files: dict[str, int] = {}

    def _read_maps(self, pid: int) -> list[tuple[int, int, str]]:
        out = []
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) < 5 or "x" not in parts[1]:
                        continue
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    path = parts[5].strip() if len(parts) > 5 else "[anonymous]"
                    dev = parts[3].split(":")
                    key = (os.makedev(int(dev[0], 16), int(dev[1], 16)), int(parts[4]))
                    cat = classify_path(path, key in self.candidate_files and key[1] != 0, self.torch_dirs,
                                        self.python_dirs)
                    out.append((lo, hi, cat if path != "[anonymous]" else "foreign", path))
        except (OSError, ValueError):
            pass
        return out

    def category(self, pid: int, ip: int) -> tuple[str, str]:
        if ip >= KERNEL_IP:
            return "kernel", ""
        for fresh in (False, True):
            if fresh or pid not in self._maps:
                self._maps[pid] = self._read_maps(pid)
            for lo, hi, cat, path in self._maps[pid]:
                if lo <= ip < hi:
                    return cat, path
        return "foreign", "[unmapped]"

    def add(self, samples: list[tuple[int, int, int]], keep: bool = True) -> dict[str, int]:
        """Attribute samples (taken while the tree is frozen, so its mappings are as they were); returns
        this batch's counts (added to the totals if ``keep``)."""
        batch = dict.fromkeys(CATEGORIES, 0)
        for pid, _, ip in samples:
            cat, path = self.category(pid, ip)
            batch[cat] += 1
            if cat == "foreign" and keep:
                self.foreign_files[path] = self.foreign_files.get(path, 0) + 1
        if keep:
            for k, v in batch.items():
                self.counts[k] += v
        return batch
