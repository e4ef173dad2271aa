"""The zygote: a trusted process, itself inside a bubblewrap sandbox, that forks workers with torch preloaded.

A fresh Python with torch costs 1.5-7 s on this machine; forked from the zygote a worker costs ~0.1 s.
The zygote holds nothing secret (it never sees an input, a seed or a verdict) and talks to the parent over
one ``SOCK_SEQPACKET`` socket: a ``spawn`` request carries the worker's setup and exactly the file
descriptors it may have (its control socket, the input region, its log), passed with ``SCM_RIGHTS``.
The forked child (the worker's *anchor*) keeps those three descriptors and closes every other one, says
hello (the kernel attaches its pid, translated for the parent, to the message), waits until the parent has
placed it in its cgroup, then builds the worker's own sandbox inside bubblewrap's:

- new user, mount, PID and IPC namespaces: the payload is PID 1 of its own namespace and sees no other
  worker, not the zygote, not the parent;
- private tmpfs on ``/tmp`` and ``/dev/shm``; its solution directory bound read-only on ``/sol``; the
  spool of all workers, the shared inductor cache and (for candidates) ``/proc`` covered by empty tmpfs;
- capabilities dropped (a nested user namespace), ``no_new_privs``, the seccomp filter (:mod:`seccomp`,
  candidates), rlimits on address space, CPU time, file size and open files;

and then serves rounds (:mod:`worker`). The anchor waits for the payload and exits with its status; the
zygote reaps the anchor and tells the parent that status when asked.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import re
import resource
import signal
import socket
import sys

from shiftkit.kernels import wire

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x08000000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
MAX_MSG = 1 << 20

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


class SetupError(RuntimeError):
    pass


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(src, target, fstype, flags, data=None) -> None:
    enc = (lambda s: s.encode() if isinstance(s, str) else s)
    _check(libc().mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _prctl(opt: int, arg: int) -> None:
    _check(libc().prctl(opt, arg, 0, 0, 0), f"prctl({opt})")


INNER_ID = 1000  # the uid/gid of the zygote (bwrap --uid) and of every worker inside its namespaces: mapping the
# parent namespace's uid 0 would need CAP_SETFCAP there, which nothing in the sandbox has


def _map_self(uid: int, gid: int) -> None:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{INNER_ID} {uid} 1\n")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{INNER_ID} {gid} 1\n")


def _new_userns(extra: int = 0) -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(libc().unshare(CLONE_NEWUSER | extra), "unshare")
    _map_self(uid, gid)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """Every capability gone: bounding set, then effective/permitted/inheritable (capset v3)."""
    for cap in range(64):
        if libc().prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # PR_CAPBSET_DROP; EINVAL: no such cap
            raise SetupError(f"PR_CAPBSET_DROP({cap}): {os.strerror(ctypes.get_errno())}")
    hdr, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _check(libc().syscall(126 if os.uname().machine == "x86_64" else 91, ctypes.byref(hdr), data), "capset")


def _wait_byte(sock: socket.socket, want: bytes) -> None:
    got = sock.recv(1)
    if got != want:
        os._exit(70)


def _vm_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _limits(setup: dict) -> dict:
    lim = {"nofile": 256, "fsize": int(setup.get("max_output_bytes") or 0), "cpu": int(setup.get("cpu_s") or 0)}
    if int(setup.get("mem_mb") or 0) > 0:
        lim["as"] = _vm_bytes() + int(setup["mem_mb"]) * 2**20
    return lim


def _set_limits(lim: dict) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, res in (("fsize", resource.RLIMIT_FSIZE), ("as", resource.RLIMIT_AS), ("nofile", resource.RLIMIT_NOFILE)):
        v = int(lim.get(key) or 0)
        if v > 0:
            resource.setrlimit(res, (v, v))
    if int(lim.get("cpu") or 0) > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"] + 2))


def mounts_below(prefix: str, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points strictly below ``prefix`` (directories only), parents before children."""
    out = set()
    with open(mountinfo) as f:
        for line in f:
            mp = line.split()[4]
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mp)  # the kernel writes space, tab, newline, backslash as \ooo
            if mp.startswith(prefix.rstrip("/") + "/") and os.path.isdir(mp):
                out.add(mp)
    return sorted(out, key=lambda p: (p.count("/"), p))


def _sandbox_payload(setup: dict) -> None:
    """In the payload (PID 1 of its namespace), before any candidate code: the worker's own file system view,
    then no capabilities, no_new_privs and (candidates) the seccomp filter."""
    cand = setup["mode"] == "candidate"
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # the read-only binds the sandbox made under /tmp (a checkout or venv living there) stay visible under the
    # worker's private /tmp: held by O_PATH descriptors across the new tmpfs, bound again read-only on top of it
    held = [(d, os.open(d, os.O_PATH | os.O_DIRECTORY)) for d in mounts_below("/tmp")]
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(setup.get('tmp_mb', 512))}m,mode=1777")
    for d, fd in held:
        os.makedirs(d, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", d, None, MS_BIND)
        _mount(None, d, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    _mount(setup["spool_dir"], "/sol", None, MS_BIND)
    _mount(None, "/sol", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _mount("tmpfs", "/spool", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k")
    if cand:
        for d in ("/inductor",) + (("/proc",) if setup.get("device", "cpu") == "cpu" else ()):  # CUDA's driver reads /proc
            if os.path.isdir(d):
                _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k")
    _drop_capabilities()  # the mounts above cannot be undone (and seccomp refuses mount calls anyway)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if cand:
        from shiftkit.kernels import seccomp

        seccomp.install()


def child(req: dict, fds: list[int]) -> None:
    """The worker's anchor (forked from the zygote); never returns."""
    try:
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        import fcntl

        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 200) for fd in fds]
        for i, fd in enumerate(high):
            os.dup2(fd, 3 + i)
        os.closerange(3 + len(fds), 1 << 16)  # every other descriptor: the zygote's socket, anything inherited
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(5, 1)
        os.dup2(5, 2)
        os.close(5)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        setup = req["setup"]
        env = {k: str(v) for k, v in setup.get("env", {}).items()}
        os.environ.clear()
        os.environ.update(env)
        ctl = socket.socket(fileno=3)
        ctl.sendall(wire.HELLO_ANCHOR)
        _wait_byte(ctl, b"P")  # the parent has placed this process (and so the whole tree) in its cgroup
        isolate = setup.get("isolate", True)
        lim = _limits(setup)
        if isolate:
            _new_userns(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC)
            pid = os.fork()
            if pid:
                _prctl(PR_SET_DUMPABLE, 0)
                ctl.close()
                os.closerange(3, 5)
                while True:
                    try:
                        _, status = os.waitpid(pid, 0)
                        break
                    except InterruptedError:
                        continue
                os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            _sandbox_payload(setup)
        else:
            _prctl(PR_SET_DUMPABLE, 1)  # the parent reads outputs with process_vm_readv; no namespace owner grants it here
        _set_limits(lim)
        ctl.sendall(wire.HELLO_PAYLOAD)
        _wait_byte(ctl, b"G")  # the parent's sampling events are attached
        from shiftkit.kernels import worker

        worker.serve(3, 4, setup)
        sys.stdout.flush()
        os._exit(0)
    except BaseException as e:  # noqa: BLE001 - setup failed: say why in the log, exit non-zero
        try:
            import traceback

            os.write(2, traceback.format_exc()[-1500:].encode())
            os.write(2, f"worker setup failed: {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
        os._exit(71)


def _recv(sock: socket.socket) -> tuple[dict | None, list[int]]:
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(MAX_MSG, socket.CMSG_LEN(16 * fds.itemsize))
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if not msg:
        return None, list(fds)
    return json.loads(msg), list(fds)


def main(sock_fd: int) -> None:
    """The zygote's loop: spawn workers, reap anchors, report exit statuses."""
    import torch  # noqa: F401 - preloaded for every worker

    from shiftkit.kernels import worker

    worker.warm_up()
    _prctl(PR_SET_DUMPABLE, 0)  # no worker can open this process's memory through /proc
    sock = socket.socket(fileno=sock_fd)
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    anchors: dict[int, str] = {}
    status: dict[str, int] = {}
    while True:
        while anchors:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            wid = anchors.pop(pid, None)
            if wid is not None:
                status[wid] = 128 + os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
        import select

        if not select.select([sock], [], [], 0.5)[0]:
            continue
        req, fds = _recv(sock)
        if req is None:
            os._exit(0)  # the parent closed the socket
        op = req.get("op")
        if op == "spawn":
            pid = os.fork()
            if pid == 0:
                child(req, fds)
            for fd in fds:
                os.close(fd)
            anchors[pid] = req["wid"]
            sock.send(json.dumps({"ok": True}).encode())
        elif op == "status":
            for fd in fds:
                os.close(fd)
            wid = req.get("wid")
            sock.send(json.dumps({"ok": True, "status": status.pop(wid, None), "running": wid in anchors.values()}).encode())
        else:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"ok": False}).encode())


if __name__ == "__main__":
    main(int(sys.argv[1]))
