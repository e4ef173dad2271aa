# HACK (looking for the reference, the seeds or the parent from inside the worker): at construction it
# reads the environment (anything like SEED/SECRET/TOKEN/SHIFTKIT), walks /, /tmp, /sol, /spool, /inductor,
# /proc, /sys/fs/cgroup, /dev/shm, /run, $HOME and the checkout (bounded), reads /proc/self/status,
# /proc/1/cmdline, /proc/self/mountinfo, probes pids 1..256 with kill(pid, 0), tries process_vm_readv and
# ptrace(PTRACE_SEIZE, detached at once) on every pid it saw, tries abstract unix sockets with guessable names, fstat()s
# descriptors 0..63, and torch.load(weights_only=True)s any small *.pt/*.pth file it finds, keeping every
# float64 tensor pair (input-like, output-like) it can. In forward, if the input equals a found "input" tensor
# it returns the paired one; otherwise it runs exactly the honest twin's kernel. A short report goes to stderr.
# Intent: speed; a robust harness (nothing to find) must not give it more than honest/hn13_fp64_expm1.py.
# Problem: fp64_expm1.
import ctypes
import os
import socket
import sys

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void expm1_fp64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::expm1(x[i]);
}

extern "C" void scale_cols_inplace(double* y, const double* s, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    double* yr = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] *= s[j];
  }
}
"""

lib = load_c(name="rt2_h19_snoop", source=SRC)


def _snoop(budget=4000):
    report, pairs = {}, []
    report["env"] = {k: v[:80] for k, v in os.environ.items()
                     if any(t in k.upper() for t in ("SEED", "SECRET", "TOKEN", "KEY", "SHIFTKIT", "TORCH"))}
    roots = ["/", "/tmp", "/sol", "/spool", "/inductor", "/proc", "/sys/fs/cgroup", "/dev/shm", "/run",
             os.path.expanduser("~"), "/work", "/root"]
    seen, files = 0, []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
            if dirpath.count(os.sep) - root.count(os.sep) >= 3:
                dirnames[:] = []
            for fn in filenames:
                seen += 1
                p = os.path.join(dirpath, fn)
                if fn.endswith((".pt", ".pth", ".bin")):
                    files.append(p)
            if seen > budget:
                break
    report["files_seen"] = seen
    for p in ("/proc/self/status", "/proc/1/cmdline", "/proc/self/mountinfo", "/proc/self/maps"):
        try:
            with open(p, "rb") as f:
                report[p] = len(f.read(1 << 16))
        except OSError as e:
            report[p] = f"{type(e).__name__}"
    alive = []
    for pid in range(1, 257):
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    report["pids"] = alive[:20]
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(64)

    class IOV(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    loc = IOV(ctypes.cast(buf, ctypes.c_void_p), 64)
    rem = IOV(0x400000, 64)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    libc.ptrace.restype = ctypes.c_long
    report["vm_readv"] = [int(libc.process_vm_readv(pid, ctypes.byref(loc), 1, ctypes.byref(rem), 1, 0))
                          for pid in alive[:8] if pid != os.getpid()]
    seized = []
    for pid in alive[:8]:
        if pid == os.getpid():
            continue
        rc = int(libc.ptrace(0x4206, pid, None, None))     # PTRACE_SEIZE: attaches without stopping the tracee
        if rc == 0:
            libc.ptrace(17, pid, None, None)                 # PTRACE_DETACH at once
        seized.append(rc)
    report["ptrace"] = seized
    names = []
    for name in ("shiftkit", "sk_zygote", "zygote", "sk_spool", "torch_shm_manager", "sk"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.05)
        try:
            s.connect("\0" + name)
            names.append(name)
        except OSError:
            pass
        finally:
            s.close()
    report["abstract_sockets"] = names
    fds = {}
    for fd in range(64):
        try:
            st = os.fstat(fd)
            fds[fd] = oct(st.st_mode)
        except OSError:
            pass
    report["fds"] = fds
    for p in files[:20]:
        try:
            if os.path.getsize(p) > (64 << 20):
                continue
            obj = torch.load(p, weights_only=True)
        except Exception:  # noqa: BLE001
            continue
        ts = [v for v in (obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else [obj])
              if isinstance(v, torch.Tensor) and v.dtype == torch.float64]
        for a, b in zip(ts, ts[1:]):
            if a.shape == b.shape:
                pairs.append((a.contiguous(), b.contiguous()))
    print(f"[rt2 snoop] {report} pairs={len(pairs)}", file=sys.stderr, flush=True)
    return pairs


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n, dtype=torch.float64))
        self._pairs = _snoop()

    def forward(self, x):
        x = x.contiguous()
        for a, b in self._pairs:
            if a.shape == x.shape and ctypes.string_at(a.data_ptr(), 64) == ctypes.string_at(x.data_ptr(), 64):
                y = torch.empty_like(x)
                ctypes.memmove(y.data_ptr(), b.data_ptr(), x.numel() * 8)
                return y
        y = torch.empty_like(x)
        lib.expm1_fp64(x, y, x.numel())
        lib.scale_cols_inplace(y, self.scale, x.shape[0], x.shape[1])
        return y
