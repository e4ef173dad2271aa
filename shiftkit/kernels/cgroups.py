"""One cgroup per worker tree, owned by the trusted parent (stdlib only).

The parent creates the group before the worker's tree exists and places the tree's first process in it,
so every process and thread the candidate ever starts is in it. From it the parent reads the whole tree's
CPU time (exited threads and reaped children included), caps tasks and memory, confines the tree to the
timing CPU(s) (cpuset: ``sched_setaffinity`` inside cannot widen it), freezes and thaws the tree (the
candidate runs only while the parent has it thawed) and kills it at once. cgroup v1 (``cpuacct``,
``pids``, ``memory``, ``freezer``, ``cpuset``, as on this machine) or v2 (unified, delegated).
"""

from __future__ import annotations

import os
import signal
import time

ROOT = "/sys/fs/cgroup"


class CgroupError(OSError):
    """A cgroup could not be created or controlled here."""


def _own_path(ctl: str) -> str:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctls, path = line.strip().split(":", 2)
                if ctl in ctls.split(","):
                    return path
    except OSError:
        pass
    return "/"


def _v1_base(ctl: str) -> str | None:
    mnt = os.path.join(ROOT, ctl)
    if not os.path.isfile(os.path.join(mnt, "cgroup.procs")):
        return None
    own = os.path.join(mnt, _own_path(ctl).lstrip("/"))
    base = own if os.path.isdir(own) else mnt
    return base if os.access(base, os.W_OK) else None


def _v2_base() -> str | None:
    for mnt in (ROOT, os.path.join(ROOT, "unified")):
        ctl = os.path.join(mnt, "cgroup.controllers")
        if os.path.isfile(ctl):
            with open(ctl) as f:
                have = f.read().split()
            if "cpu" in have and "pids" in have and os.access(mnt, os.W_OK):
                return mnt
    return None


def problem() -> str:
    """'' where a worker group with CPU accounting and a freezer can be made here, else why not."""
    if _v2_base():
        return ""
    missing = [c for c in ("cpuacct", "freezer") if _v1_base(c) is None]
    return f"no writable cgroup v1 {'/'.join(missing)} hierarchy and no delegated cgroup v2" if missing else ""


class TreeGroup:
    """See the module docstring. ``cpus``: the CPUs the tree may run on (None: unchanged)."""

    V1 = ("cpuacct", "pids", "memory", "freezer", "cpuset")

    def __init__(self, name: str, pids_max: int = 0, mem_bytes: int = 0, cpus: list[int] | None = None):
        self.dirs: dict[str, str] = {}
        self.v2 = False
        base = _v2_base()
        try:
            if base:
                d = os.path.join(base, name)
                os.mkdir(d)
                self.dirs = {"unified": d}
                self.v2 = True
                self._w("unified", "pids.max", pids_max or "max")
                if mem_bytes:
                    self._w("unified", "memory.max", mem_bytes)
                if cpus is not None and os.path.exists(os.path.join(d, "cpuset.cpus")):
                    self._w("unified", "cpuset.cpus", ",".join(map(str, cpus)))
                return
            for ctl in self.V1:
                b = _v1_base(ctl)
                if b is None:
                    if ctl in ("cpuacct", "freezer"):
                        raise CgroupError(f"no writable cgroup v1 {ctl} hierarchy")
                    continue
                d = os.path.join(b, name)
                os.mkdir(d)
                self.dirs[ctl] = d
                if ctl == "cpuset":  # a v1 cpuset starts empty: copy the parent's, then narrow
                    for f in ("cpuset.mems", "cpuset.cpus"):
                        with open(os.path.join(b, f)) as src:
                            self._w(ctl, f, src.read().strip())
                    if cpus is not None:
                        self._w(ctl, "cpuset.cpus", ",".join(map(str, cpus)))
            if pids_max and "pids" in self.dirs:
                self._w("pids", "pids.max", pids_max)
            if mem_bytes and "memory" in self.dirs:
                self._w("memory", "memory.limit_in_bytes", mem_bytes)
        except OSError as e:
            self.close()
            raise CgroupError(f"cgroup {name}: {e}") from None

    # -- plumbing
    def _w(self, ctl: str, fname: str, value) -> None:
        with open(os.path.join(self.dirs[ctl], fname), "w") as f:
            f.write(str(value))

    def _r(self, ctl: str, fname: str) -> str:
        with open(os.path.join(self.dirs[ctl], fname)) as f:
            return f.read()

    @property
    def _main(self) -> str:
        return "unified" if self.v2 else "cpuacct"

    def join(self, pid: int) -> None:
        """Place ``pid`` (a host pid) in every hierarchy of the group."""
        for ctl in self.dirs:
            self._w(ctl, "cgroup.procs", pid)

    def cpu_ns(self) -> int:
        if self.v2:
            for line in self._r("unified", "cpu.stat").splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) * 1000
            raise CgroupError("cpu.stat has no usage_usec")
        return int(self._r("cpuacct", "cpuacct.usage"))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self._r(self._main, "cgroup.procs").split()]
        except (OSError, KeyError):
            return []

    def tasks(self) -> int:
        try:
            return len(self._r(self._main, "cgroup.threads" if self.v2 else "tasks").split())
        except (OSError, KeyError):
            return -1

    def mem_failcnt(self) -> int:
        try:
            if self.v2:
                for line in self._r("unified", "memory.events").splitlines():
                    if line.startswith(("max ", "oom_kill ")) and int(line.split()[1]):
                        return int(line.split()[1])
                return 0
            return int(self._r("memory", "memory.failcnt")) if "memory" in self.dirs else 0
        except (OSError, ValueError, KeyError):
            return 0

    # -- freezer
    def frozen(self) -> bool:
        if self.v2:
            return "frozen 1" in self._r("unified", "cgroup.events")
        return self._r("freezer", "freezer.state").strip() == "FROZEN"

    def freeze(self, deadline: float) -> bool:
        """Freeze the whole tree and wait until every task is frozen (False if ``deadline`` passed first)."""
        if self.v2:
            self._w("unified", "cgroup.freeze", 1)
        else:
            self._w("freezer", "freezer.state", "FROZEN")
        spins = 0
        while not self.frozen():
            if time.monotonic() > deadline:
                return False
            spins += 1
            if spins > 50:
                time.sleep(0.0002)
        return True

    def thaw(self) -> None:
        if self.v2:
            self._w("unified", "cgroup.freeze", 0)
        else:
            self._w("freezer", "freezer.state", "THAWED")

    # -- teardown
    def kill(self, wait_s: float = 15.0) -> None:
        """SIGKILL every task (a frozen task dies once thawed, so thaw after the signal) and wait until the
        group is empty (at most ``wait_s``: on a loaded machine dying trees take a while to be scheduled)."""
        if self.v2:
            try:
                self._w("unified", "cgroup.kill", 1)
            except OSError:
                pass
        end = time.monotonic() + wait_s
        while True:
            pids = self.pids()
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.thaw()
            except OSError:
                pass
            if not pids or time.monotonic() > end:
                return
            time.sleep(0.01)

    def close(self) -> None:
        if self.dirs:
            self.kill()
        end = time.monotonic() + 15.0
        for d in self.dirs.values():
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > end:
                        break
                    time.sleep(0.01)
        self.dirs = {}


def _boot_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


_REAPED: set[str] = set()


def make_group(prefix: str, pids_max: int = 0, mem_bytes: int = 0, cpus: list[int] | None = None) -> TreeGroup:
    """A fresh TreeGroup named ``<prefix>_<pid>_<boot ns>`` (CgroupError where none can be made here). The
    first group of a prefix in a process reaps that prefix's orphans first (:func:`reap_orphans`)."""
    if prefix not in _REAPED:
        _REAPED.add(prefix)
        reap_orphans(prefix)
    return TreeGroup(f"{prefix}_{os.getpid()}_{_boot_ns()}", pids_max, mem_bytes, cpus)


def _started_after(pid: int, boot_ns: int) -> bool | None:
    """Did process ``pid`` start after ``boot_ns`` (CLOCK_BOOTTIME)? None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    start_ns = int(fields[19]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")  # field 22: start time, ticks since boot
    return start_ns > boot_ns + 1_000_000_000  # one second of slack for the tick's resolution


def orphan(name: str, prefix: str) -> bool:
    """Pure enough to test: is the group ``name`` (``<prefix>_<pid>_<boot ns>``) left behind by a parent that
    is gone? True when no process has that pid, or the one that has it started after the group was made (the
    pid was reused). Names that do not parse are never orphans (not ours)."""
    parts = name.split("_")
    if len(parts) != 3 or parts[0] != prefix or not (parts[1].isdigit() and parts[2].isdigit()):
        return False
    pid, made = int(parts[1]), int(parts[2])
    if pid == os.getpid():
        return False
    later = _started_after(pid, made)
    return later is None or later


def _kill_dirs(dirs: dict[str, str], wait_s: float = 10.0) -> None:
    """SIGKILL every task in the group's directories (whichever hierarchies are left), thaw it so the
    signals are taken, wait until it is empty (at most ``wait_s``), then remove the directories."""
    end = time.monotonic() + wait_s
    while True:
        pids = set()
        for ctl, d in dirs.items():
            if ctl == "unified":
                try:
                    with open(os.path.join(d, "cgroup.kill"), "w") as f:
                        f.write("1")
                except OSError:
                    pass
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids |= {int(x) for x in f.read().split()}
            except (OSError, ValueError):
                pass
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        for ctl, fname, v in (("freezer", "freezer.state", "THAWED"), ("unified", "cgroup.freeze", "0")):
            if ctl in dirs:
                try:
                    with open(os.path.join(dirs[ctl], fname), "w") as f:
                        f.write(v)
                except OSError:
                    pass
        if not pids or time.monotonic() > end:
            break
        time.sleep(0.01)
    for d in dirs.values():
        try:
            os.rmdir(d)
        except OSError:
            pass


def reap_orphans(prefix: str = "skw") -> list[str]:
    """Kill the trees of, and remove, every ``prefix`` group of this user whose parent is gone (a parent killed
    by a signal runs no ``finally``: its frozen trees cannot die until thawed, and nothing else thaws them).
    Returns the groups' paths that were reaped. Never raises: a group it cannot remove is left for later."""
    found: dict[str, dict[str, str]] = {}
    bases = {"unified": _v2_base()} if _v2_base() else {c: _v1_base(c) for c in TreeGroup.V1}
    for ctl, base in bases.items():
        if not base:
            continue
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for n in names:
            d = os.path.join(base, n)
            try:
                mine = os.stat(d).st_uid == os.getuid()
            except OSError:
                continue
            if mine and orphan(n, prefix):
                found.setdefault(n, {})[ctl] = d
    out = []
    for dirs in found.values():
        _kill_dirs(dirs)
        out += [d for d in dirs.values() if not os.path.exists(d)]
    return out
