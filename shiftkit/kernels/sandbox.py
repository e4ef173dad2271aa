"""The trusted parent's handle on a worker process.

Workers are forked from a forkserver that has torch and the worker module preloaded (a fresh worker
costs ~0.1 s instead of a torch import). Every wait has a deadline; a dead worker's exit signal is
mapped to a structured failure (crash, output limit, CPU limit) and a hang is killed. Timing of a
call is done here, in the parent: ``t0 = perf_counter_ns(); send('R'); recv('D'); t1``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from shiftkit.kernels import wire

_CTX = None


def _ctx():
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["shiftkit.kernels.worker"])
    return _CTX


@contextlib.contextmanager
def _main_hidden():
    """Keep multiprocessing from re-running the caller's ``__main__`` (a script, pytest) in the worker."""
    main = sys.modules.get("__main__")
    saved = {k: getattr(main, k) for k in ("__file__", "__spec__") if main is not None and hasattr(main, k)}
    try:
        if main is not None:
            for k in saved:
                if k == "__spec__":
                    main.__spec__ = None
                else:
                    delattr(main, k)
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


class WorkerFailure(Exception):
    def __init__(self, code: str, message: str, log_tail: str = "", violations: dict | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.log_tail = log_tail
        self.violations = violations or {}


_SIG_CODES = {signal.SIGXFSZ: "output_limit", signal.SIGXCPU: "timeout", signal.SIGKILL: "worker_crash"}


class Worker:
    def __init__(self, setup: dict, deadline_s: float):
        self.deadline = time.monotonic() + deadline_s
        self.tmp = tempfile.mkdtemp(prefix="sk_worker_")
        setup = dict(setup, log_path=os.path.join(self.tmp, "worker.log"))
        self.log_path = setup["log_path"]
        self.conn, child = _ctx().Pipe(duplex=True)
        self.proc = _ctx().Process(target=_entry, args=(child, setup), daemon=True)
        with _main_hidden():
            self.proc.start()
        child.close()
        self.killed_for_timeout = False
        hello, _ = self.recv()
        self.sandbox = {k: hello.get(k) for k in ("network_isolated", "reason")}
        self.sandbox["network_namespace_verified"] = self._netns_differs()

    # -- plumbing
    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def _fail(self) -> WorkerFailure:
        self.proc.join(timeout=2)
        code = self.proc.exitcode
        tail = self.log_tail()
        if self.killed_for_timeout:
            return WorkerFailure("timeout", "evaluation exceeded its wall-time limit", tail)
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            c = _SIG_CODES.get(sig, "worker_crash")
            if c == "worker_crash" and ("bad_alloc" in tail or "Cannot allocate memory" in tail):
                c = "out_of_memory"
            return WorkerFailure(c, f"worker died with {sig.name}", tail)
        return WorkerFailure("worker_crash", f"worker exited with status {code}", tail)

    def _wait(self) -> None:
        rem = self._remaining()
        if rem <= 0 or not self.conn.poll(rem):
            self.killed_for_timeout = True
            self.kill()
            raise self._fail()

    def recv_raw(self) -> bytes:
        self._wait()
        try:
            return self.conn.recv_bytes()
        except (EOFError, OSError):
            raise self._fail() from None

    def recv(self) -> tuple[dict, bytes]:
        return wire.unpack(self.recv_raw())

    def send(self, header: dict, blob: bytes = b"") -> None:
        try:
            self.conn.send_bytes(wire.pack(header, blob))
        except (BrokenPipeError, OSError):
            raise self._fail() from None

    def request(self, header: dict, blob: bytes = b"") -> tuple[dict, bytes]:
        self.send(header, blob)
        return self.recv()

    def cpu_ns(self) -> int:
        """On-CPU time of all the worker's threads (kernel scheduler accounting, /proc/<pid>/task/*/schedstat)."""
        total = 0
        base = f"/proc/{self.proc.pid}/task"
        try:
            for tid in os.listdir(base):
                try:
                    with open(f"{base}/{tid}/schedstat") as f:
                        total += int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
        except OSError:
            return -1
        return total

    def timed_call(self) -> tuple[int, int]:
        """One timed forward: (wall ns, worker on-CPU ns), both measured here in the parent. Wall time is
        ``perf_counter_ns`` around a 1-byte round trip; CPU time is the worker's scheduler accounting,
        read before and after (robust to other processes competing for the cores)."""
        c0 = self.cpu_ns()
        try:
            t0 = time.perf_counter_ns()
            self.conn.send_bytes(b"R")
            if not self.conn.poll(max(0.0, self._remaining())):
                self.killed_for_timeout = True
                self.kill()
                raise self._fail()
            msg = self.conn.recv_bytes()
            t1 = time.perf_counter_ns()
        except (EOFError, OSError, BrokenPipeError):
            raise self._fail() from None
        if msg != b"D":  # the forward raised: the worker sent a structured error instead
            header, _ = wire.unpack(msg)
            raise WorkerFailure(header.get("kind", "runtime_error"), header.get("error", "forward failed"),
                                violations=header.get("violations"))
        c1 = self.cpu_ns()
        return t1 - t0, (c1 - c0) if c0 >= 0 and c1 >= 0 else -1

    def threads(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/task"))
        except OSError:
            return -1

    def _netns_differs(self) -> bool:
        try:
            return os.readlink(f"/proc/{self.proc.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.conn.send_bytes(wire.pack({"cmd": "exit"}))
                if self.conn.poll(2):
                    self.conn.recv_bytes()
        except (OSError, EOFError, BrokenPipeError):
            pass
        self.kill()
        self.conn.close()
        for f in Path(self.tmp).glob("*"):
            f.unlink(missing_ok=True)
        os.rmdir(self.tmp)


def _entry(conn, setup):
    from shiftkit.kernels.worker import worker_main

    worker_main(conn, setup)
