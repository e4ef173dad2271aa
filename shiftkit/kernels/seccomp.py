"""The candidate worker's seccomp filter, built with libseccomp (``libseccomp.so.2`` through ctypes).

Loaded by the worker itself, after its namespaces are set up and before any candidate code runs; a filter
cannot be removed and is inherited by every thread and child. It refuses (EPERM) what could reach the
parent's instruments or undo the sandbox: disabling the parent's perf events on this task
(``prctl(PR_TASK_PERF_EVENTS_DISABLE)``), ``ptrace`` and cross-process memory access, ``perf_event_open``,
``bpf``, ``userfaultfd``, ``io_uring``, keyrings, mounts, new namespaces (``unshare``, ``setns``, namespace
flags to ``clone``; ``clone3``, whose flags a filter cannot read, is refused with ENOSYS so libc falls back to
``clone``), module and kexec loading, ``reboot``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 4, 7
CLONE_NEW_BITS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)  # NS..NET
PR_TASK_PERF_EVENTS_DISABLE, PR_TASK_PERF_EVENTS_ENABLE = 31, 32

DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "perf_event_open", "bpf", "userfaultfd",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "mount",
          "umount2", "pivot_root", "chroot", "unshare", "setns", "move_mount", "open_tree", "fsopen", "fsmount",
          "fsconfig", "fspick", "mount_setattr", "init_module", "finit_module", "delete_module", "kexec_load",
          "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "lookup_dcookie",
          "open_by_handle_at", "name_to_handle_at", "fanotify_init", "personality", "process_madvise", "pidfd_getfd",
          "kcmp")


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def _errno(e: int) -> int:
    return 0x00050000 | (e & 0xFFFF)  # SCMP_ACT_ERRNO(e)


_lib = None


def libseccomp():
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
        lib = ctypes.CDLL(name, use_errno=True)
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(_ArgCmp)]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


def _rule(lib, ctx, action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
    nr = lib.seccomp_syscall_resolve_name(name.encode())
    if nr < 0:
        return  # not a syscall on this architecture
    arr = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
    rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
    if rc < 0:
        raise OSError(-rc, f"seccomp_rule_add({name}): {errno.errorcode.get(-rc, rc)}")


def install() -> None:
    """Load the filter into the calling thread's process (call while single-threaded, with no_new_privs set)."""
    lib = libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        deny = _errno(errno.EPERM)
        for name in DENIED:
            _rule(lib, ctx, deny, name)
        for opt in (PR_TASK_PERF_EVENTS_DISABLE, PR_TASK_PERF_EVENTS_ENABLE):
            _rule(lib, ctx, deny, "prctl", (0, SCMP_CMP_EQ, opt, 0))
        for bit in CLONE_NEW_BITS:  # clone(flags, ...) with any namespace flag
            _rule(lib, ctx, deny, "clone", (0, SCMP_CMP_MASKED_EQ, bit, bit))
        _rule(lib, ctx, _errno(errno.ENOSYS), "clone3")
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, f"seccomp_load: {errno.errorcode.get(-rc, rc)}")
    finally:
        lib.seccomp_release(ctx)
