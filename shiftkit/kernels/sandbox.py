"""The trusted parent's handle on sandboxed workers: bubblewrap, the zygote, cgroups, perf sampling, rounds.

**bubblewrap** (Debian's ``bubblewrap``; ``scripts/sysdeps.sh`` installs it) builds every sandbox's file
system from nothing: the OS (``/usr``, the loader cache), the Python installation, torch, the ``shiftkit``
package, all read-only; a private ``/tmp``; ``/dev`` with the harmless nodes; new user, PID, network,
IPC, UTS and cgroup namespaces; no capabilities; ``--die-with-parent``; ``--new-session``. Nothing else
of the host is visible: no build cache, no other solution, no problem file but the one a baseline needs.
Builds run in one such sandbox per command (:mod:`build`); workers are forked from a zygote that lives in
one (:mod:`zygote`), each then taking its own namespaces inside it.

A :class:`Worker` is one sandboxed process tree, in its own cgroup (:mod:`cgroups`), sampled by the
parent's perf events (:mod:`perf`), fed through a parent-owned input region (:mod:`shm`) and a control
socket. The parent keeps the tree frozen except inside a round: it writes the inputs, sends the request and
thaws the tree; on the reply it freezes the tree, stops its clocks, reads the tree's CPU time and reads the
outputs out of the frozen worker's memory (``process_vm_readv``). Only the descriptors the parent passes
exist in a worker.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from shiftkit.kernels import cgroups, perf, shm, wire

SAFE_ENV = ("LANG", "LC_ALL")
BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from shiftkit.kernels import zygote; zygote.main(int(sys.argv[2]))"


class IsolationUnavailable(Exception):
    """The sandbox cannot be set up here (a harness-side condition, not a finding)."""


BUILDS_FILE = ".sk_builds.json"  # in the worker's solution directory: the setup's artefact entries



def input_ranges(st: os.stat_result, maps_path: str) -> list[tuple[int, int]]:
    """The address ranges of ``maps_path`` (a ``/proc/PID/maps``) that map the file of ``st``, matched by
    device (``major:minor``, hex) and inode, never by the inode number alone."""
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    out = []
    with open(maps_path) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) >= 5 and parts[4] == str(st.st_ino) and parts[3] == dev:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out

class WorkerFailure(Exception):
    def __init__(self, code: str, message: str, log_tail: str = "", violations: dict | None = None):
        super().__init__(message)
        self.code, self.message, self.log_tail, self.violations = code, message, log_tail, violations or {}


def shiftkit_root() -> str:
    """The directory holding the ``shiftkit`` package the parent runs (a checkout or site-packages)."""
    import shiftkit

    return os.path.dirname(os.path.dirname(os.path.realpath(shiftkit.__file__)))


def python_paths() -> list[str]:
    """Read-only binds for the interpreter: its prefixes and the site-packages directories on sys.path
    (not arbitrary sys.path entries such as a script's directory)."""
    prefixes = {os.path.realpath(d) for d in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    out = set(prefixes)
    for p in sys.path:
        if not p or not os.path.isdir(p):
            continue
        r = os.path.realpath(p)
        if r.endswith(("site-packages", "dist-packages")) and not any(r.startswith(q + "/") for q in prefixes):
            out.add(r)
    return sorted(out)


def _os_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for d in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        p = "/" + d
        if os.path.islink(p):
            args += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            args += ["--ro-bind", p, p]
    for p in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"):
        if os.path.exists(p):
            args += ["--ro-bind", p, p]
    if os.path.isdir("/sys/devices/system/cpu"):  # torch's CPU-capability detection reads it
        args += ["--ro-bind", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    return args


def _gpu_binds() -> list[str]:
    """The NVIDIA device nodes, for workers of the cuda backend (written, not run: no GPU here)."""
    import glob

    out = []
    for p in sorted(glob.glob("/dev/nvidia*")):
        out += ["--dev-bind", p, p]
    return out


def bwrap_argv(ro: list[str] = (), rw: list[tuple[str, str]] = (), tmp_bytes: int = 512 << 20, env: dict | None = None,
               extra: list[str] = ()) -> list[str]:
    """The bubblewrap command line for a sandbox with the OS, ``ro`` dirs (same path) and ``rw`` binds."""
    bw = shutil.which("bwrap")
    if not bw:
        raise IsolationUnavailable("bubblewrap (bwrap) is not installed (scripts/sysdeps.sh installs it)")
    args = [bw, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", *_os_binds()]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    seen = set()
    for d in ro:  # after the tmpfs: a checkout and its venv may live under /tmp
        d = os.path.realpath(d)
        if d in seen or not os.path.exists(d):
            continue
        seen.add(d)
        args += ["--ro-bind", d, d]
    for src, dst in rw:
        args += ["--bind", src, dst]
    args += ["--clearenv"]
    for k, v in (env or {}).items():
        args += ["--setenv", k, str(v)]
    return args + list(extra)


def base_env(extra: dict | None = None) -> dict:
    env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ}
    env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "USER": "sandbox",
                "LOGNAME": "sandbox"})
    env.update(extra or {})
    return env


_PROBE: dict[str, str] = {}


def facility_problem() -> str:
    """'' where the facilities every evaluation needs exist here, else one line naming the missing one and the
    fix (probed once per process). No setting waives them: there is no fallback for the parent's clock and
    freezer (cgroups), its sampling (perf_event_open) or its reading of outputs (process_vm_readv)."""
    if "facility" not in _PROBE:
        why = ""
        for name, probe, fix in (
                ("cgroups", cgroups.problem, "delegate a cgroup v2 subtree to this user, or mount cgroup v1 cpuacct+freezer writable"),
                ("perf_event_open", perf.problem, "set kernel.perf_event_paranoid <= 2 (sysctl), or run with CAP_PERFMON"),
                ("process_vm_readv", shm.vm_read_problem, "allow same-user ptrace of descendants (kernel.yama.ptrace_scope <= 1)")):
            try:
                w = probe()
            except OSError as e:
                w = str(e)
            if w:
                why = f"{name} is unavailable here: {w.rstrip('.')}; fix: {fix}"
                break
        _PROBE["facility"] = " ".join(why.split())  # one line
    return _PROBE["facility"]


def isolation_problem() -> str:
    """'' where workers can be sandboxed here (bubblewrap with user namespaces), else why not (probed once per
    process). Only this one may be waived (allow_unisolated: the result is then marked untrusted)."""
    if "why" not in _PROBE:
        why = ""
        try:
            r = subprocess.run(bwrap_argv(extra=["--", "/bin/true"]), capture_output=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                why = ("bubblewrap cannot create a sandbox here (user namespaces disabled? "
                       "sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0): "
                       + r.stderr.decode(errors="replace").strip()[:300])
        except IsolationUnavailable as e:
            why = str(e)
        except (OSError, subprocess.SubprocessError) as e:
            why = f"bubblewrap failed to run: {e}"
        _PROBE["why"] = " ".join(why.split())
    return _PROBE["why"]


# ----------------------------------------------------------------------------- the zygote

class Zygote:
    """One zygote per (parent process, isolation, inductor cache dir)."""

    def __init__(self, isolate: bool, inductor_dir: str, start_timeout_s: float = 300.0):
        self.isolate, self.inductor_dir = isolate, inductor_dir
        self.lock = threading.Lock()
        self.spool_host = tempfile.mkdtemp(prefix="sk_spool_")
        self.spool = "/spool" if isolate else self.spool_host
        self.log_path = os.path.join(self.spool_host, "zygote.log")
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = mine
        cmd = [sys.executable, "-I", "-c", BOOT, shiftkit_root(), str(theirs.fileno())]
        if isolate:
            cmd = bwrap_argv(ro=python_paths() + [os.path.join(shiftkit_root(), "shiftkit")],
                             rw=[(self.spool_host, "/spool"), (inductor_dir, "/inductor")],
                             env=base_env({"OMP_NUM_THREADS": "1"}),
                             extra=[*_gpu_binds(), "--uid", "1000", "--gid", "1000", "--dir", "/sol", "--chdir", "/tmp",
                                    "--"]) + cmd
        log = open(self.log_path, "wb")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(cmd, pass_fds=(theirs.fileno(),), close_fds=True, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, env=base_env({"OMP_NUM_THREADS": "1"}),
                                         start_new_session=True, cwd="/")
        finally:
            log.close()
            theirs.close()
        try:
            r = self._reply(time.monotonic() + start_timeout_s)
        except WorkerFailure as e:
            self.close()
            if e.code == "timeout":  # the evaluation's budget ran out (a loaded machine): a timeout, not a missing sandbox
                raise WorkerFailure("timeout", f"the worker zygote did not start within the {start_timeout_s:.1f} s "
                                    f"left of the run's budget") from None
            raise IsolationUnavailable(f"the worker zygote did not start: {e.message}: {self.log_tail()}") from None
        if not r.get("ready"):
            self.close()
            raise IsolationUnavailable("the worker zygote did not start")

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-600:].decode(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _reply(self, deadline: float) -> dict:
        while True:
            if wire._ready(self.sock.fileno(), 1, max(0.0, min(1.0, deadline - time.monotonic()))):
                msg = self.sock.recv(1 << 16)
                if not msg:
                    raise WorkerFailure("worker_crash", "the zygote closed its socket")
                return json.loads(msg)
            if self.proc.poll() is not None:
                raise WorkerFailure("worker_crash", f"the zygote exited ({self.proc.returncode})")
            if time.monotonic() > deadline:
                raise WorkerFailure("timeout", "the zygote did not answer in time")

    def request(self, req: dict, fds: list[int] = (), timeout_s: float = 30.0) -> dict:
        with self.lock:
            self.sock.sendmsg([json.dumps(req).encode()],
                              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(__import__("array").array("i", fds))))]
                              if fds else [])
            return self._reply(time.monotonic() + timeout_s)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.spool_host, ignore_errors=True)


_ZYGOTES: dict[tuple, Zygote] = {}
_ZLOCK = threading.Lock()


def zygote(isolate: bool, inductor_dir: str, timeout_s: float = 300.0) -> Zygote:
    """This process's zygote for (isolation, inductor cache), started on first use within ``timeout_s``."""
    key = (os.getpid(), isolate, inductor_dir)
    with _ZLOCK:
        z = _ZYGOTES.get(key)
        if z is None or not z.alive():
            if z is not None:
                z.close()
            z = _ZYGOTES[key] = Zygote(isolate, inductor_dir, start_timeout_s=max(1.0, timeout_s))
        return z


def shutdown() -> None:
    """Stop every zygote this process started (also at exit)."""
    with _ZLOCK:
        for k, z in list(_ZYGOTES.items()):
            if k[0] == os.getpid():
                z.close()
            del _ZYGOTES[k]


import atexit  # noqa: E402

atexit.register(shutdown)


# ----------------------------------------------------------------------------- a worker

@dataclass
class RoundResult:
    wall_ns: int
    cpu_ns: int
    header: dict
    samples: dict = field(default_factory=dict)


_SIG_CODES = {signal.SIGXFSZ: "output_limit", signal.SIGXCPU: "timeout"}


def _recv_hello(sock: socket.socket, want: bytes, deadline: float) -> int:
    """The worker's hello; returns its pid in the parent's namespace, from the kernel-attached credentials."""
    import struct

    data, pid = b"", None
    while len(data) < len(want):
        rem = deadline - time.monotonic()
        if rem <= 0 or not wire._ready(sock.fileno(), 1, rem):
            raise wire.ChannelTimeout("no hello from the worker")
        msg, anc, _, _ = sock.recvmsg(len(want) - len(data), socket.CMSG_SPACE(12))
        if not msg:
            raise wire.ChannelClosed("the worker closed its socket during setup")
        data += msg
        for level, typ, blob in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", blob[:12])[0]
    if data != want or not pid:
        raise wire.ProtocolError("malformed hello from the worker")
    return pid


class Worker:
    """One sandboxed worker tree (see the module docstring). ``files``: {name in /sol: host path to copy}."""

    def __init__(self, setup: dict, files: dict[str, str], in_size: int, deadline: float,
                 cpus: list[int] | None, pids_max: int, mem_bytes: int, inductor_dir: str, candidate_so: list[str] = (),
                 sample_period_ns: int = 50_000):
        self.deadline = deadline
        self.isolate = setup.get("isolate", True)
        self.zyg = zygote(self.isolate, inductor_dir, deadline - time.monotonic())
        self.wid = secrets.token_hex(8)
        self.dir = os.path.join(self.zyg.spool_host, self.wid)
        self.group = self.sampler = self.ch = self.sock = self.attribution = None
        self.inp = None
        self.setup_mode = setup.get("mode", "candidate")
        self.log_cap = int(setup.get("max_output_bytes") or 0)  # the log's RLIMIT_FSIZE (set in the zygote)
        self.candidate_files: set = set()
        self.layouts: dict[str, int] = {}
        self.blocked: list[bool] = []  # per attributed round: run under the worker's op blocker (block_ops)
        self.pending: list = []
        self.closed = False
        self.log_path = os.path.join(self.zyg.spool_host, self.wid + ".log")
        try:
            os.mkdir(self.dir, 0o755)
            for name, src in files.items():
                dst = os.path.join(self.dir, name)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o644)
            self.candidate_files = {(os.stat(os.path.join(self.dir, n)).st_dev, os.stat(os.path.join(self.dir, n)).st_ino)
                                    for n in candidate_so}
            self.inp = shm.Region("sk_in", in_size, readonly_for_worker=True)
            self.group = cgroups.make_group("skw", pids_max=pids_max, mem_bytes=mem_bytes, cpus=cpus)
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock = a
            a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            logfd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            sol = os.path.join(self.zyg.spool, self.wid)
            full = dict(setup, in_size=self.inp.size, spool_dir=sol,
                        sol_dir="/sol" if self.isolate else sol)
            if "builds" in full:  # the artefacts' entries (prototypes: unbounded) go by file, not in the zygote's
                # fixed-size request (redteam3 h18: 8,000 exports overflowed the seqpacket message, EMSGSIZE)
                with open(os.path.join(self.dir, BUILDS_FILE), "w") as f:
                    json.dump(full.pop("builds"), f)
                os.chmod(os.path.join(self.dir, BUILDS_FILE), 0o644)
                full["builds_file"] = BUILDS_FILE
            try:
                r = self.zyg.request({"op": "spawn", "wid": self.wid, "setup": full}, [b.fileno(), self.inp.fd, logfd],
                                     timeout_s=max(1.0, deadline - time.monotonic()))
            finally:
                b.close()
                os.close(logfd)
            if not r.get("ok"):
                raise WorkerFailure("worker_crash", "the zygote refused to start a worker")
            anchor = _recv_hello(a, wire.HELLO_ANCHOR, deadline)
            self.group.join(anchor)
            a.sendall(b"P")
            payload = _recv_hello(a, wire.HELLO_PAYLOAD, deadline)
            self.pid = payload
            self.sampler = perf.Sampler(payload, period_ns=sample_period_ns, stacks=True)
            self.attribution = perf.Attribution(self.candidate_files, [os.path.join(self.dir, n) for n in candidate_so],
                                                deadline)
            a.sendall(b"G")
            self.ch = wire.Channel(a.fileno(), max_blob=0)
            self.ch.idle = self._collect  # a long round: empty the sampling buffers while it runs (none lost)
            self.ch.idle_s = 0.025  # a ring holds ~58 ms of one CPU's samples (perf.STACK_DUMP)
            self.frozen = False
        except (wire.ChannelTimeout, wire.ChannelClosed, wire.ProtocolError) as e:
            f = self._fail(str(e))
            self.close()
            raise f from None
        except BaseException:
            self.close()
            raise

    # -- plumbing
    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def exit_status(self, wait_s: float = 3.0) -> int | None:
        end = time.monotonic() + wait_s
        while True:
            try:
                r = self.zyg.request({"op": "status", "wid": self.wid}, timeout_s=5)
            except (WorkerFailure, OSError):
                return None
            if r.get("status") is not None or not r.get("running") or time.monotonic() > end:
                return r.get("status")
            time.sleep(0.05)

    def _fail(self, why: str = "", timed_out: bool = False) -> WorkerFailure:
        if timed_out:
            self.kill()
            return WorkerFailure("timeout", "the evaluation's wall-clock budget ran out", self.log_tail())
        st = self.exit_status()
        tail = self.log_tail()
        if st is None:
            self.kill()
            st = self.exit_status(1.0)
        mem = self.group is not None and self.group.mem_failcnt() > 0
        if st is not None and st > 128:
            sig = st - 128
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            code = _SIG_CODES.get(sig, "out_of_memory" if sig == signal.SIGKILL and mem else "worker_crash")
            hint = " (inputs are mapped read-only: writing them faults)" if sig in (signal.SIGSEGV, signal.SIGBUS) else ""
            return WorkerFailure(code, f"worker died with {name}{hint}", tail)
        if st == 71:
            return WorkerFailure("worker_crash", "worker setup failed: " + tail.strip().splitlines()[-1][:300] if tail.strip()
                                 else "worker setup failed", tail)
        return WorkerFailure("out_of_memory" if mem else "worker_crash",
                             f"worker exited with status {st}" + (f" ({why})" if why else ""), tail)

    def _violation(self, msg: str) -> WorkerFailure:
        self.kill()
        return WorkerFailure("protocol_violation", msg, self.log_tail())

    def _recv(self, deadline: float) -> dict:
        try:
            h, _ = self.ch.recv(deadline, max_blob=0)
        except wire.ChannelTimeout:
            raise self._fail(timed_out=True) from None
        except wire.ChannelClosed:
            raise self._fail() from None
        except wire.ProtocolError as e:
            raise self._violation(f"malformed reply from the worker: {e}") from None
        bad = header_problem(h)
        if bad:
            raise self._violation(f"malformed reply from the worker: {bad}")
        return h

    def _send(self, header: dict, blob: bytes = b"") -> None:
        try:
            self.ch.send(header, blob, self.deadline)
        except wire.ChannelTimeout:
            raise self._fail(timed_out=True) from None
        except wire.ChannelClosed:
            raise self._fail() from None

    def _collect(self) -> None:
        """Raw samples taken so far in this round; attributed only once the tree is frozen again."""
        if self.sampler is not None:
            self.pending += self.sampler.drain()

    def _samples(self) -> list:
        out, self.pending = self.pending + self.sampler.drain(), []
        return out

    def freeze(self) -> None:
        if not self.group.freeze(self.deadline):
            raise self._fail(timed_out=True)
        self.frozen = True

    def thaw(self) -> None:
        self.group.thaw()
        self.frozen = False

    # -- the protocol
    def load(self, blob: bytes) -> dict:
        """Construct the model (candidate import happens here); the tree is frozen afterwards."""
        self._send({"cmd": "load"}, blob)
        h = self._recv(self.deadline)
        if h.get("reply_to") != "load":
            raise self._violation("the reply does not answer 'load'")
        self.freeze()
        self._check_log()
        self.load_samples = self.attribution.add(self._samples(), keep=False)  # import time: not a round
        return h

    def _layout(self, in_lay, out_lay) -> int:
        """The worker's id for this (input, output) layout, defined in an exchange of its own the first time it
        is used: before the round's inputs are written (the region still holds the last round's, already
        verified, inputs), outside every clock; its samples count for no round."""
        key = json.dumps([in_lay, out_lay])
        k = self.layouts.get(key)
        if k is None:
            k = len(self.layouts)
            self._send({"cmd": "layout", "id": k, "inputs": in_lay, "outputs": out_lay})
            self.thaw()
            h = self._recv(self.deadline)
            self.freeze()
            self.attribution.add(self._samples(), keep=False)
            if h.get("reply_to") != "layout" or not h.get("ok"):
                raise self._violation(f"the worker did not take the round's layout: {str(h.get('error', h))[:300]}")
            self.layouts[key] = k
        return k

    def round(self, inputs, in_lay, out_lay, block_ops: bool = False) -> RoundResult:
        """One round: inputs written while frozen; clocks run from the thaw to the confirmed freeze."""
        if not self.frozen:
            self.freeze()
        if self.ch.pending():
            raise self._violation("the worker sent a frame nobody asked for (a forged completion?)")
        lay_in, values = shm.without_values(in_lay)  # the layout exchange holds no value (shm.without_values)
        lay = self._layout(lay_in, shm.without_values(out_lay)[0])
        self.inp.write(inputs, in_lay)
        nonce = secrets.randbits(62)
        req = {"cmd": "round", "nonce": nonce, "lay": lay, "block_ops": block_ops}
        if values:
            req["values"] = values  # the round's own scalars, in its request: inside the clock
        self._send(req)
        c0 = self.group.cpu_ns()
        t0 = time.perf_counter_ns()
        self.thaw()
        h = self._recv(self.deadline)
        self.freeze()
        t1 = time.perf_counter_ns()
        c1 = self.group.cpu_ns()
        if h.get("reply_to") != "round" or h.get("nonce") != nonce:
            raise self._violation("the reply does not carry the round's nonce (a forged completion?)")
        self._check_log()
        samples = self.attribution.add(self._samples())
        self.blocked.append(bool(block_ops))
        return RoundResult(t1 - t0, c1 - c0, h, samples)

    def _check_log(self) -> None:
        """The log at its cap means a write was refused (EFBIG): a worker that ignores SIGXFSZ and the error
        still wrote more than allowed. The parent decides from the file's size, not from a signal or an
        exception the candidate can suppress."""
        if not self.log_cap:
            return
        try:
            size = os.path.getsize(self.log_path)
        except OSError:
            return
        if size >= self.log_cap:
            self.kill()
            raise WorkerFailure("output_limit", f"the worker wrote {size} bytes to its log, the limit "
                                f"(max_output_bytes={self.log_cap})", self.log_tail())

    def outputs(self, out_lay, header: dict):
        """The round's outputs, read by the parent from the frozen worker's memory at the addresses its reply
        names (as many bytes as ``out_lay`` says); a reply whose addresses do not fit is a protocol violation.
        A candidate's outputs are then overwritten with the parent's pattern (:func:`shm.poison_memory`), so
        nothing of this round's output survives into the next."""
        if not self.frozen:
            raise RuntimeError("outputs are read only while the tree is frozen")
        try:
            out = shm.read_remote(self.pid, out_lay, header.get("addrs") or [], header.get("values") or [],
                                  skip=self._input_ranges(), strides=header.get("strides"))
            if self.setup_mode == "candidate":
                shm.poison_memory(self.pid, self._spans(out_lay, header))
            return out
        except shm.UnwrittenOutput as e:
            self.kill()
            raise WorkerFailure("output_unwritten", str(e), self.log_tail()) from None
        except shm.BadOutputLayout as e:
            self.kill()
            raise WorkerFailure("output_layout", str(e), self.log_tail()) from None
        except shm.RemoteReadError as e:
            raise self._violation(f"the worker's reply names output memory the parent cannot read: {e}") from None

    def poison(self, out_lay, header: dict) -> None:
        """A baseline's outputs overwritten like a candidate's (:func:`shm.poison_memory`), though never read: every
        party's output memory is in the same state (written by the parent, out of the clock) when its next round
        starts. Memory that cannot be written is left as it is (a baseline is the harness's own code)."""
        if not self.frozen:
            raise RuntimeError("outputs are overwritten only while the tree is frozen")
        try:
            shm.poison_memory(self.pid, self._spans(out_lay, header))
        except shm.RemoteReadError:
            pass

    @staticmethod
    def _spans(out_lay, header: dict) -> list[tuple[int, int]]:
        """The output spans a reply names, less the leaves that alias inputs or weights (:func:`shm.output_spans`)."""
        return shm.output_spans(out_lay, header.get("addrs") or [], header.get("strides"))

    def _input_ranges(self) -> list[tuple[int, int]]:
        """Where the worker maps the parent's input region: mappings of the memfd's (device, inode). While the
        parent holds the memfd open no other file has that pair, so a file the worker makes with the same inode
        number on another device (redteam7 h10) is not exempt from the written-page proof."""
        return input_ranges(os.fstat(self.inp.fd), f"/proc/{self.pid}/maps")

    def kill(self) -> None:
        if self.group is not None:
            self.group.kill()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        # no goodbye: the tree stays frozen and is killed (a worker never runs outside a round, not even to exit)
        if self.group is not None:
            self.group.close()
        if self.sampler is not None:
            self.sampler.close()
        if self.sock is not None:
            self.sock.close()
        if self.inp is not None:
            self.inp.close()
        if self.zyg is not None and self.group is not None:
            self.exit_status(2.0)  # let the zygote reap the anchor
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


_HEADER_TYPES = {"reply_to": str, "ok": bool, "nonce": int, "kind": str, "error": str, "trace": str,
                 "violations": dict, "values": list, "addrs": list, "strides": list}


def header_problem(h: dict) -> str | None:
    """Pure: why a reply header is not well-formed, else None. Unknown keys are ignored."""
    for k, t in _HEADER_TYPES.items():
        if k in h and h[k] is not None and not (isinstance(h[k], t) and not (t is int and isinstance(h[k], bool))):
            return f"reply field {k!r} has type {type(h[k]).__name__}, expected {t.__name__}"
    v = h.get("violations") or {}
    if len(v) > 1000 or not all(isinstance(a, str) and len(a) < 200 and isinstance(n, int) and not isinstance(n, bool)
                                for a, n in v.items()):
        return "reply field 'violations' is not a small map of op name -> count"
    vals = h.get("values") or []
    if len(vals) > 4096 or not all(x is None or isinstance(x, (bool, int, float, str)) for x in vals):
        return "reply field 'values' is not a short list of scalars"
    addrs = h.get("addrs") or []
    if len(addrs) > 4096 or not all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < 1 << 64 for a in addrs):
        return "reply field 'addrs' is not a short list of addresses"
    st = h.get("strides") or []
    if len(st) > 4096 or not all(s is None or (isinstance(s, list) and len(s) <= 64 and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 48 for v in s)) for s in st):
        return "reply field 'strides' is not a short list of stride lists"
    return None
