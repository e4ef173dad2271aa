"""The sandbox for builds and candidate runs (stdlib only; also runnable as a script for builds).

:func:`enter` turns the calling process into the root of a jailed process tree and returns only in the
innermost process; every process in between waits and exits with the child's status:

    caller (host namespaces) -> C: new user, mount, network, PID, IPC and UTS namespaces
        -> init (PID 1 of the new PID namespace: reaps, exits with the payload's status, so the kernel
           kills whatever is left in the namespace)
            -> payload: read-only view of the whole file system except private tmpfs scratch dirs,
               fresh /proc of its own PID namespace (/proc/sys read-only), minimal /dev, no network, no
               capabilities (a nested user namespace), ``PR_SET_NO_NEW_PRIVS``,
               ``PR_SET_PDEATHSIG`` at every level, rlimits, scrubbed environment.

The caller joins a :class:`TreeGroup` (cgroup v1 cpuacct/pids/memory/freezer, or v2) *before* forking, so
the whole tree is accounted (CPU time of exited threads and children included), capped in processes and
memory, and killed at once. Where namespaces are refused, :func:`enter` raises :class:`JailError` (the
evaluation then fails closed unless the user allowed unisolated runs).

As a script (``python jail.py SPEC_JSON``) it jails itself and ``execve``s ``spec["argv"]``: the build path.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
_OPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TERM")


class JailError(RuntimeError):
    """The OS refused a namespace or mount step: isolation is unavailable."""


_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise JailError(f"{what}: {os.strerror(e)}")


def _mount(src, target, fstype, flags, data=None) -> None:
    enc = (lambda s: s.encode() if isinstance(s, str) else s)
    _check(libc().mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def prctl(option: int, arg: int) -> None:
    _check(libc().prctl(option, arg, 0, 0, 0), f"prctl({option})")


def scrub_env(extra: dict | None = None) -> dict:
    """The environment a jailed process gets: a few safe variables, nothing else (no secrets)."""
    env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = "/tmp"
    env["TMPDIR"] = "/tmp"
    env.update(extra or {})
    return env


def _mounts() -> list[tuple[str, int]]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            mp = parts[4].replace("\\040", " ")
            flags = 0
            for o in parts[5].split(","):
                flags |= _OPT_FLAGS.get(o, 0)
            out.append((mp, flags))
    return out


DEV_NODES = ("null", "zero", "full", "random", "urandom")


def _read_only_root(rw: list[str], hide: list[str], tmp_mb: int, ro: list[str] = ()) -> list[str]:
    """In a fresh mount namespace: everything read-only; ``hide`` dirs covered by empty tmpfs; a minimal
    /dev (null, zero, full, random, urandom, private shm); private tmpfs on /tmp; then the ``rw`` dirs
    bind-mounted writable and the ``ro`` dirs read-only (both may lie under /tmp). Returns the mounts that could not be made read-only
    (only under /proc, which is replaced by a fresh instance)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    fds = [os.open(d, os.O_PATH | os.O_DIRECTORY) for d in rw]  # reach the rw dirs after /tmp is covered
    covered = ("/tmp/", "/dev/") + tuple(h.rstrip("/") + "/" for h in hide)
    ro = [d for d in ro if os.path.isdir(d) and d.startswith(covered)]
    ro_fds = [os.open(d, os.O_PATH | os.O_DIRECTORY) for d in ro]
    devs = {n: os.open(f"/dev/{n}", os.O_PATH) for n in DEV_NODES if os.path.exists(f"/dev/{n}")}
    failed = []
    for mp, flags in sorted(_mounts(), key=lambda m: m[0].count("/")):
        try:
            _mount(None, mp, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
        except JailError:
            failed.append(mp)
    bad = [m for m in failed if not m.startswith(("/proc", "/dev"))]
    if bad:
        raise JailError(f"could not make {', '.join(bad[:3])} read-only")
    for d in hide:
        if os.path.isdir(d):
            _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC | MS_NODEV, "size=64m,mode=0755")
    for n, fd in devs.items():
        os.close(os.open(f"/dev/{n}", os.O_CREAT | os.O_WRONLY, 0o666))
        _mount(f"/proc/self/fd/{fd}", f"/dev/{n}", None, MS_BIND)
        os.close(fd)
    os.mkdir("/dev/shm", 0o1777)
    os.chmod("/dev/shm", 0o1777)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_mb}m,mode=1777")
    for d, fd in zip(ro, ro_fds):  # dirs the payload must read that lie under a covered dir (e.g. /tmp)
        os.makedirs(d, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", d, None, MS_BIND)
        _mount(None, d, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    for d, fd in zip(rw, fds):  # after the read-only binds: a writable dir may lie inside one
        os.makedirs(d, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", d, None, MS_BIND)
        _mount(None, d, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
        os.close(fd)
    if os.path.isdir("/tmp"):
        os.chmod("/tmp", 0o1777)  # makedirs above may have created parents with the default mode
    return failed


def _pdeathsig(expected_parent: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != expected_parent:  # the parent died before prctl took effect
        os._exit(137)


def _status_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _wait_exit(pid: int) -> None:
    """Wait for ``pid`` and exit with its status (128+signal for a signal death)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            os._exit(_status_code(status))
        except ChildProcessError:
            os._exit(255)
        except InterruptedError:
            continue


def _init(payload_pid: int) -> None:
    """PID 1 of the sandbox: reap everything; when the payload exits, exit with its status (the kernel then
    kills every process left in the namespace)."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(255)
        except InterruptedError:
            continue
        if pid == payload_pid:
            code = _status_code(status)
            try:
                os.kill(-1, signal.SIGKILL)  # everything else in this namespace, then reap it all here
            except OSError:
                pass
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
                except InterruptedError:
                    continue
            os._exit(code)


def set_limits(limits: dict) -> None:
    """rlimits: ``cpu_s``, ``as_bytes``, ``fsize_bytes``, ``nproc``, ``nofile`` (0/absent = unchanged); no cores."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, res in (("fsize_bytes", resource.RLIMIT_FSIZE), ("nproc", resource.RLIMIT_NPROC),
                     ("as_bytes", resource.RLIMIT_AS), ("nofile", resource.RLIMIT_NOFILE)):
        v = int(limits.get(key) or 0)
        if v > 0:
            resource.setrlimit(res, (v, v))
    if int(limits.get("cpu_s") or 0) > 0:
        c = int(limits["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (c, c + 2))


def runtime_paths() -> list[str]:
    """Dirs the interpreter, its packages and shiftkit itself are read from (``sys.prefix``, every
    ``sys.path`` dir, the checkout holding ``shiftkit``). They stay visible, read-only, inside the jail
    even where they lie under a dir it covers: a CI clone and its ``.venv`` may live under /tmp."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout / site dir
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, here}
    dirs |= {p for p in sys.path if p and os.path.isdir(p)}
    return sorted({os.path.realpath(d) for d in dirs})


def enter(rw: list[str] | None = None, hide: list[str] | None = None, tmp_mb: int = 512,
          ro: list[str] | None = None) -> dict:
    """Jail the calling process (see the module docstring). Returns, in the payload, a dict describing the
    isolation. Raises JailError in the caller when the OS refuses a step (nothing has been forked then, or
    the forked helper is reaped). The caller must be single-threaded."""
    rw = [os.path.realpath(d) for d in (rw or [])]
    hide = [os.path.realpath(d) for d in (hide or [])]
    ro = sorted({os.path.realpath(d) for d in (ro or [])})
    root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    top = os.getpid()
    pid = os.fork()
    if pid:  # the caller: map ids, then stay as the tree's anchor
        os.close(w1)
        os.close(r2)
        msg = _read_all(r1, 1)
        if msg != b"u":
            rest = _read_all(r1, 4096)
            os.close(r1)
            os.close(w2)
            os.waitpid(pid, 0)
            raise JailError((msg + rest).decode(errors="replace")[1:] or "sandbox helper died")
        try:
            if not root:
                with open(f"/proc/{pid}/setgroups", "w") as f:
                    f.write("deny")
            maps = (f"0 {uid} 1\n", f"0 {gid} 1\n")
            for name, text in zip(("uid_map", "gid_map"), maps):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write(text)
            os.write(w2, b"m")
        except OSError as e:
            os.write(w2, b"x")
            os.waitpid(pid, 0)
            raise JailError(f"writing the id maps: {e}") from None
        msg = _read_all(r1, 1)  # 'r' once the payload is jailed, or an error
        if msg != b"r":
            rest = _read_all(r1, 4096)
            os.waitpid(pid, 0)
            raise JailError((msg + rest).decode(errors="replace")[1:] or "sandbox setup failed")
        os.close(r1)
        os.close(w2)
        _wait_exit(pid)
    # C: the namespace creator
    try:
        os.close(r1)
        os.close(w2)
        _pdeathsig(top)
        _check(libc().unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS),
               "unshare(user, mount, net, pid, ipc, uts)")
        os.write(w1, b"u")
        if _read_all(r2, 1) != b"m":
            os._exit(1)
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        failed = _read_only_root(rw, hide, tmp_mb, ro)
    except Exception as e:  # noqa: BLE001 - reported to the caller, which raises JailError
        _send_err(w1, f"{type(e).__name__}: {e}" if not isinstance(e, JailError) else str(e))
        os._exit(1)
    g = os.fork()
    if g:
        os.close(r2)
        os.close(w1)
        _wait_exit(g)
    # init: PID 1 of the new PID namespace
    try:
        _pdeathsig(0)  # the parent lives outside this PID namespace: getppid() is 0
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for sub in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
            if os.path.exists(sub):
                _mount(sub, sub, None, MS_BIND)
                _mount(None, sub, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except Exception as e:  # noqa: BLE001
        _send_err(w1, str(e))
        os._exit(1)
    p = os.fork()
    if p:
        os.close(r2)
        os.close(w1)
        _init(p)
    # the payload
    try:
        _pdeathsig(1)
        # a nested user namespace: the payload keeps its uid for file access (read-only anyway) but has no
        # capability over the mount, network or PID namespaces set up above
        _check(libc().unshare(CLONE_NEWUSER), "unshare(user) to drop capabilities")
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        os.write(w1, b"r")
    except Exception as e:  # noqa: BLE001 - reported to the caller, which raises JailError
        _send_err(w1, f"{type(e).__name__}: {e}" if not isinstance(e, JailError) else str(e))
        os._exit(1)
    os.close(w1)
    os.close(r2)
    return {"isolated": True, "namespaces": "user,mount,net,pid,ipc,uts (+ nested user ns: no capabilities)",
            "read_only_root": True, "not_read_only": failed}


def _send_err(fd: int, msg: str) -> None:
    try:
        os.write(fd, b"e" + msg.encode()[:4000])
    except OSError:
        pass


def _read_all(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        try:
            b = os.read(fd, n - len(out))
        except InterruptedError:
            continue
        if not b:
            break
        out += b
    return out


# ----------------------------------------------------------------------------- cgroups

class TreeGroup:
    """One cgroup per jailed tree: whole-tree CPU time (``cpu_ns``), task count, process and memory caps, and
    an atomic kill. cgroup v1 (cpuacct + pids + memory + freezer, as on this machine) or v2 (unified)."""

    ROOT = "/sys/fs/cgroup"

    def __init__(self, name: str, pids_max: int = 0, mem_bytes: int = 0):
        self.dirs: dict[str, str] = {}
        self.v2 = False
        base_v2 = self._v2_base()
        if base_v2:
            d = os.path.join(base_v2, name)
            os.mkdir(d)
            self.dirs = {"unified": d}
            self.v2 = True
            self._w("unified", "pids.max", pids_max or "max")
            if mem_bytes:
                self._w("unified", "memory.max", mem_bytes)
            return
        for ctl in ("cpuacct", "pids", "memory", "freezer"):
            base = self._v1_base(ctl)
            if base is None:
                if ctl == "cpuacct":
                    raise OSError("no cpuacct cgroup")
                continue
            d = os.path.join(base, name)
            os.mkdir(d)
            self.dirs[ctl] = d
        if pids_max and "pids" in self.dirs:
            self._w("pids", "pids.max", pids_max)
        if mem_bytes and "memory" in self.dirs:
            self._w("memory", "memory.limit_in_bytes", mem_bytes)

    @classmethod
    def _own(cls, ctl: str) -> str:
        try:
            with open("/proc/self/cgroup") as f:
                for line in f:
                    _, ctls, path = line.strip().split(":", 2)
                    if ctl in ctls.split(","):
                        return path
        except OSError:
            pass
        return "/"

    @classmethod
    def _v1_base(cls, ctl: str) -> str | None:
        mnt = os.path.join(cls.ROOT, ctl)
        if not os.path.isfile(os.path.join(mnt, "cgroup.procs")):
            return None
        own = os.path.join(mnt, cls._own(ctl).lstrip("/"))
        base = own if os.path.isdir(own) else mnt
        return base if os.access(base, os.W_OK) else None

    @classmethod
    def _v2_base(cls) -> str | None:
        for mnt in (cls.ROOT, os.path.join(cls.ROOT, "unified")):
            ctl = os.path.join(mnt, "cgroup.controllers")
            if os.path.isfile(ctl):
                with open(ctl) as f:
                    have = f.read().split()
                if "cpu" in have and "pids" in have and os.access(mnt, os.W_OK):
                    return mnt
        return None

    def _w(self, ctl: str, fname: str, value) -> None:
        with open(os.path.join(self.dirs[ctl], fname), "w") as f:
            f.write(str(value))

    def _r(self, ctl: str, fname: str) -> str:
        with open(os.path.join(self.dirs[ctl], fname)) as f:
            return f.read()

    def join(self, pid: int = 0) -> None:
        for ctl in self.dirs:
            self._w(ctl, "cgroup.procs", pid or os.getpid())

    def cpu_ns(self) -> int:
        if self.v2:
            for line in self._r("unified", "cpu.stat").splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) * 1000
            return -1
        return int(self._r("cpuacct", "cpuacct.usage"))

    def pids(self) -> list[int]:
        ctl = "unified" if self.v2 else "cpuacct"
        try:
            return [int(x) for x in self._r(ctl, "cgroup.procs").split()]
        except OSError:
            return []

    def tasks(self) -> int:
        ctl = "unified" if self.v2 else "cpuacct"
        try:
            return len(self._r(ctl, "cgroup.threads" if self.v2 else "tasks").split())
        except OSError:
            return -1

    def mem_failcnt(self) -> int:
        try:
            if self.v2:
                for line in self._r("unified", "memory.events").splitlines():
                    if line.startswith("max "):
                        return int(line.split()[1])
                return 0
            return int(self._r("memory", "memory.failcnt")) if "memory" in self.dirs else 0
        except (OSError, ValueError, KeyError):
            return 0

    @staticmethod
    def _inner(pid: int) -> bool:
        """Is ``pid`` a sandboxed process below a sandbox init (its innermost PID is not 1)?"""
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        ids = line.split()[1:]
                        return len(ids) > 1 and ids[-1] != "1"
        except OSError:
            pass
        return False

    def _kill_pass(self, pids: list[int]) -> None:
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def kill(self, spare: int = 0) -> None:
        """SIGKILL the tree, innermost first: the payload's processes, so the sandbox init reaps them and
        exits, its parent reaps the init and so on (no orphan is left to an init that may not reap); then
        whatever is left, except ``spare`` (the anchor the caller reaps itself)."""
        frozen = False
        if "freezer" in self.dirs:
            try:
                self._w("freezer", "freezer.state", "FROZEN")
                frozen = True
            except OSError:
                pass
        self._kill_pass([p for p in self.pids() if p != spare and self._inner(p)])
        if frozen:
            try:
                self._w("freezer", "freezer.state", "THAWED")
            except OSError:
                pass
        for _ in range(100):  # up to 1 s for the chain to unwind on its own
            if not [p for p in self.pids() if p != spare]:
                return
            time.sleep(0.01)
        if self.v2 and not spare:
            try:
                self._w("unified", "cgroup.kill", 1)
            except OSError:
                pass
        for _ in range(50):
            pids = [p for p in self.pids() if p != spare]
            if not pids:
                break
            self._kill_pass(pids)
            time.sleep(0.01)

    def close(self) -> None:
        self.kill()
        for ctl, d in self.dirs.items():
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def cgroups_usable() -> bool:
    return TreeGroup._v2_base() is not None or TreeGroup._v1_base("cpuacct") is not None


def make_group(prefix: str, pids_max: int = 0, mem_bytes: int = 0) -> TreeGroup | None:
    """A fresh TreeGroup, or None where cgroups are not writable here."""
    name = f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"
    try:
        return TreeGroup(name, pids_max, mem_bytes)
    except OSError:
        return None


# ----------------------------------------------------------------------------- build launcher

def _main(spec_json: str) -> None:
    """Build launcher: join the cgroup, jail, set limits, then run ``argvs`` one after the other (argv lists,
    no shell) with output to ``log``; exit with the first non-zero status."""
    spec = json.loads(spec_json)
    for path in spec.get("cgroup_procs", []):
        with open(path, "w") as f:
            f.write(str(os.getpid()))
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if spec.get("isolate", True):
        try:
            enter(rw=spec.get("rw", []), hide=spec.get("hide", []), tmp_mb=int(spec.get("tmp_mb", 1024)),
                  ro=spec.get("ro", []))
        except JailError as e:
            sys.stderr.write(f"sandbox: {e}\n")
            os._exit(97)
    set_limits(spec.get("limits", {}))
    os.chdir(spec["cwd"])
    marks = spec.get("marks", {})
    for i, argv in enumerate(spec["argvs"]):
        if str(i) in marks:
            os.write(log, f"\n{marks[str(i)]}\n".encode())
        pid = os.fork()
        if pid == 0:
            os.dup2(log, 1)
            os.dup2(log, 2)
            try:
                os.execvpe(argv[0], argv, spec["env"])
            except OSError as e:
                os.write(2, f"cannot run {argv[0]}: {e}\n".encode())
                os._exit(127)
        _, status = os.waitpid(pid, 0)
        code = _status_code(status)
        if code:
            os._exit(code)
    os._exit(0)


if __name__ == "__main__":
    _main(sys.argv[1])
