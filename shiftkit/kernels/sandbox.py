"""The trusted parent's handle on a jailed worker process tree.

Workers are forked from a forkserver that has torch and the worker module preloaded (a fresh worker costs
~0.1-0.5 s instead of a torch import); the forkserver is started with a scrubbed environment, so no
secret reaches it or its children. Each worker joins its own cgroup and jails itself (``jail.enter``:
user, mount, network, PID, IPC and UTS namespaces, read-only file system, no capabilities) before any
candidate code runs. The parent owns the clock and the CPU accounting: time is ``perf_counter_ns``
around a framed request/response with a per-call nonce, CPU time is the cgroup's whole-tree counter.
Every read has a deadline and a length cap (``wire.Channel``); a dead worker's exit status is mapped to
a structured failure; close() kills the whole tree.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import time

from shiftkit.kernels import jail, wire

_CTX = None
SECRET_ENV = "SHIFTKIT_KERNEL_SECRET_SEED"


def _secretish(name: str) -> bool:
    n = name.upper()
    return name == SECRET_ENV or any(s in n for s in ("SECRET", "TOKEN", "PASSWORD", "API_KEY", "CREDENTIAL"))


@contextlib.contextmanager
def _scrubbed_environ():
    saved = {k: v for k, v in os.environ.items() if _secretish(k)}
    for k in saved:
        del os.environ[k]
    try:
        yield
    finally:
        os.environ.update(saved)


def _ctx():
    global _CTX
    if _CTX is None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["shiftkit.kernels.worker"])
        from multiprocessing import forkserver

        with _scrubbed_environ(), _main_hidden():
            forkserver.ensure_running()
        _CTX = ctx
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


class IsolationUnavailable(Exception):
    """The sandbox could not be set up (namespaces refused): a harness-side condition, not a finding."""


_HEADER_TYPES = {"reply_to": str, "ok": bool, "nonce": int, "kind": str, "error": str, "trace": str, "reused": bool,
                 "kernel_calls": int, "out_digest": str, "in_digest": str, "inputs_digest": str, "violations": dict,
                 "isolation_error": str, "isolation": dict, "pid": int, "hello": bool, "stage": str}


def header_problem(h: dict) -> str | None:
    """Pure: why a reply header is not well-formed (wrong type of a known key, oversized strings, a
    violations map that is not str -> int), else None. Unknown keys are ignored."""
    for k, t in _HEADER_TYPES.items():
        if k in h and h[k] is not None and not (isinstance(h[k], t) and not (t is int and isinstance(h[k], bool))):
            return f"reply field {k!r} has type {type(h[k]).__name__}, expected {t.__name__}"
    v = h.get("violations") or {}
    if len(v) > 1000 or not all(isinstance(a, str) and len(a) < 200 and isinstance(n, int) and not isinstance(n, bool)
                                for a, n in v.items()):
        return "reply field 'violations' is not a small map of op name -> count"
    if any(isinstance(x, str) and len(x) > 100_000 for x in h.values()):
        return "a reply string exceeds 100000 characters"
    return None


_SIG_CODES = {signal.SIGXFSZ: "output_limit", signal.SIGXCPU: "timeout", signal.SIGKILL: "worker_crash"}


class Worker:
    def __init__(self, setup: dict, deadline_s: float, max_frame_bytes: int = 1 << 30, pids_max: int = 64,
                 mem_bytes: int = 0):
        self.deadline = time.monotonic() + deadline_s
        self.tmp = tempfile.mkdtemp(prefix="sk_worker_")
        self.log_path = os.path.join(self.tmp, "worker.log")
        self.group = jail.make_group("skw", pids_max=pids_max, mem_bytes=mem_bytes) if setup.get("isolate", True) else None
        setup = dict(setup, log_path=self.log_path,
                     cgroup_procs=[os.path.join(d, "cgroup.procs") for d in self.group.dirs.values()] if self.group else [])
        self.killed_for_timeout = False
        self.conn, child = _ctx().Pipe(duplex=True)
        self.proc = _ctx().Process(target=_entry, args=(child, setup), daemon=True)
        with _main_hidden():
            self.proc.start()
        child.close()
        self.ch = wire.Channel(self.conn.fileno(), max_frame_bytes)
        try:
            hello, _ = self.recv()
        except WorkerFailure:
            self.close()
            raise
        if hello.get("isolation_error"):
            msg = hello["isolation_error"]
            self.close()
            raise IsolationUnavailable(msg)
        self.sandbox = dict(hello.get("isolation") or {})
        self.sandbox["cpu_accounting"] = "cgroup" if self.group else "none"
        self.sandbox["network_namespace_verified"] = self._netns_differs()
        self.base_tasks = self.tasks()

    # -- plumbing
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
        if self.proc.exitcode is None:
            self.kill()
        code = self.proc.exitcode
        tail = self.log_tail()
        if self.killed_for_timeout:
            return WorkerFailure("timeout", "evaluation exceeded its wall-time limit", tail)
        sig = -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
        if sig:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            c = _SIG_CODES.get(sig, "worker_crash")
            if c == "worker_crash" and ("bad_alloc" in tail or "Cannot allocate memory" in tail
                                        or (self.group is not None and self.group.mem_failcnt() > 0)):
                c = "out_of_memory"
            return WorkerFailure(c, f"worker died with {name}", tail)
        return WorkerFailure("worker_crash", f"worker exited with status {code}", tail)

    def _violation(self, msg: str) -> WorkerFailure:
        self.kill()
        return WorkerFailure("protocol_violation", msg, self.log_tail())

    def recv(self, max_blob: int | None = None) -> tuple[dict, bytes]:
        try:
            h, b = self.ch.recv(self.deadline, max_blob)
            bad = header_problem(h)
            if bad:
                raise wire.ProtocolError(bad)
            return h, b
        except wire.ChannelTimeout:
            self.killed_for_timeout = True
            self.kill()
            raise self._fail() from None
        except wire.ChannelClosed:
            raise self._fail() from None
        except wire.ProtocolError as e:
            raise self._violation(f"malformed reply from the worker: {e}") from None

    def send(self, header: dict, blob: bytes = b"") -> None:
        try:
            self.ch.send(header, blob, self.deadline)
        except wire.ChannelTimeout:
            self.killed_for_timeout = True
            self.kill()
            raise self._fail() from None
        except wire.ChannelClosed:
            raise self._fail() from None

    def request(self, header: dict, blob: bytes = b"", max_blob: int | None = None) -> tuple[dict, bytes]:
        if self.ch.pending():
            raise self._violation("the worker sent a frame nobody asked for (forged reply?)")
        self.send(header, blob)
        h, b = self.recv(max_blob)
        if h.get("reply_to") != header.get("cmd"):
            raise self._violation(f"reply {h.get('reply_to')!r} does not answer {header.get('cmd')!r}")
        return h, b

    def _tree(self) -> list[int]:
        """Live pids of the worker's tree, walked from the anchor through /proc (the fallback without cgroups)."""
        out, todo = [], [self.proc.pid]
        while todo and len(out) < 4096:
            pid = todo.pop()
            out.append(pid)
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        todo += [int(x) for x in f.read().split()]
            except OSError:
                continue
        return out

    def cpu_ns(self) -> int:
        """On-CPU time of the worker's whole process tree. With a cgroup: exact, exited threads and children
        included. Without: -1 (live-thread accounting would miss exited work; the timer falls back to wall)."""
        if self.group is None:
            return -1
        try:
            return self.group.cpu_ns()
        except (OSError, ValueError):
            return -1

    def tasks(self) -> int:
        """Tasks (threads of all processes) in the worker's tree, the jail's helper processes included."""
        if self.group is not None:
            return self.group.tasks()
        n = 0
        for pid in self._tree():
            try:
                n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
        return n or -1

    def timed_call(self, nonce: int) -> tuple[int, int, dict]:
        """One timed forward: (wall ns, whole-tree on-CPU ns, reply header), all measured here. The reply
        must carry the request's nonce; a frame waiting before the request is a forgery."""
        if self.ch.pending():
            raise self._violation("the worker sent a frame before the timed request (forged completion?)")
        c0 = self.cpu_ns()
        t0 = time.perf_counter_ns()
        self.send({"cmd": "run", "nonce": nonce})
        h, _ = self.recv(max_blob=0)
        t1 = time.perf_counter_ns()
        c1 = self.cpu_ns()
        if h.get("reply_to") != "run" or h.get("nonce") != nonce:
            raise self._violation("timed reply does not carry the request's nonce (forged completion?)")
        if not h.get("ok"):
            raise WorkerFailure(h.get("kind", "runtime_error"), h.get("error", "forward failed"),
                                violations=h.get("violations"))
        return t1 - t0, (c1 - c0) if c0 >= 0 and c1 >= 0 else -1, h

    def pin(self, cpu: int) -> bool:
        """Pin every task of the worker's tree to one CPU (threads started later inherit it). Placement only:
        the clock and the CPU accounting stay the parent's. False where the kernel refused."""
        pids = self.group.pids() if self.group is not None else self._tree()
        ok = bool(pids)
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    os.sched_setaffinity(int(tid), {cpu})
                except (OSError, ValueError):
                    ok = False
        return ok

    def _netns_differs(self) -> bool:
        pids = self.group.pids() if self.group is not None else []
        try:
            mine = os.readlink("/proc/self/ns/net")
            return bool(pids) and all(os.readlink(f"/proc/{p}/ns/net") != mine for p in pids[-1:])
        except OSError:
            return False

    def kill(self) -> None:
        """Kill the whole tree: everything but the anchor first (it then reaps its child and exits, so no
        orphan is left behind), then the anchor if it is still there."""
        if self.group is not None and self.proc.pid:
            self.group.kill(spare=self.proc.pid)
            self.proc.join(timeout=3)
        elif self.proc.pid:  # no cgroup: kill the tree we can see, innermost first
            for pid in reversed(self._tree()[1:]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.proc.join(timeout=3)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        if self.group is not None:
            self.group.kill()

    def close(self) -> None:
        try:
            if self.proc.is_alive() and not self.ch.pending():
                self.ch.send({"cmd": "exit"}, b"", time.monotonic() + 1)
                self.ch.recv(time.monotonic() + 2, 0)
        except (wire.ChannelTimeout, wire.ChannelClosed, wire.ProtocolError, OSError):
            pass
        self.kill()
        if self.group is not None:
            self.group.close()
        self.conn.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _entry(conn, setup):
    from shiftkit.kernels.worker import worker_main

    worker_main(conn, setup)
