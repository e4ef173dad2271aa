"""The evaluation worker: runs in a child process (forkserver with torch preloaded), untrusted.

Before any candidate code runs it scrubs its environment, joins its cgroup, jails itself
(:func:`jail.enter`) and sets rlimits; then it loads the problem (for the in-worker reference copy, whose
output only poisons freed memory) and the candidate, and serves the parent's framed commands. It never
sees expected outputs or seeds: the parent sends input tensors and compares outputs itself. Before every
candidate call it checks that no torch function/dispatch mode, global module hook or trace function is
installed (candidate code could otherwise run while inputs are loaded); after every forward that the op
blocker is still on top of the dispatch stack. Everything it reports is untrusted data to the parent.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

import torch  # noqa: F401 - preloaded by the forkserver

from shiftkit.kernels import jail, wire


def _vm_bytes() -> int:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _poison(x) -> None:
    if isinstance(x, torch.Tensor):
        if x.is_floating_point():
            x.fill_(float("nan"))
        elif x.dtype != torch.bool:
            x.fill_(-7777)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _poison(v)
    elif isinstance(x, dict):
        for v in x.values():
            _poison(v)


def _ptrs(x) -> list[int]:
    if isinstance(x, torch.Tensor):
        return [x.untyped_storage().data_ptr()] if x.numel() else []
    if isinstance(x, (list, tuple)):
        return [p for v in x for p in _ptrs(v)]
    if isinstance(x, dict):
        return [p for v in x.values() for p in _ptrs(v)]
    return []


class Tampering(Exception):
    """Harness state inside the worker was changed by candidate code."""


_HOOK_NAMES = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
               "_global_backward_pre_hooks", "_global_forward_hooks_with_kwargs", "_global_module_registration_hooks",
               "_global_parameter_registration_hooks", "_global_buffer_registration_hooks")


def check_clean() -> None:
    """No candidate code may be armed to run outside its forward: modes, global hooks, trace functions."""
    import threading

    import torch.nn.modules.module as M
    from torch.overrides import _get_current_function_mode_stack

    if torch._C._len_torch_dispatch_stack():
        raise Tampering("a TorchDispatchMode is active outside ModelNew.forward")
    if _get_current_function_mode_stack():
        raise Tampering("a TorchFunctionMode is active outside ModelNew.forward")
    for name in _HOOK_NAMES:
        if getattr(M, name, None):
            raise Tampering(f"a global module hook is installed (torch.nn.modules.module.{name})")
    if sys.gettrace() or sys.getprofile() or threading.gettrace() or threading.getprofile():
        raise Tampering("a trace/profile function is installed")


def _import_candidate(setup: dict):
    import importlib.util

    from shiftkit.kernels import runtime
    from shiftkit.kernels.solution import BuildSpec

    runtime._PREBUILT_BACKEND[0] = setup["backend"]
    runtime.install_prebuilt(setup["builds"])
    for b in setup["builds"]:
        if b.get("workspace_ext"):
            spec = BuildSpec(**b["spec"])
            mod = runtime.load_built(spec, b["so_path"], b.get("so_sha256"))
            sys.modules["kernel_ext"] = mod
            sys.modules["cuda_extension"] = mod
    for b in setup["builds"]:  # TORCH_LIBRARY ops register at dlopen: load every artefact before candidate Python
        runtime.preload(BuildSpec(**b["spec"]), b["so_path"], b.get("so_sha256"))
    native_ops = set(torch._C._dispatch_get_all_op_names())
    sol_dir = setup["solution_dir"]
    if setup.get("layout") == "workspace":
        sys.path.insert(0, sol_dir)
    spec = importlib.util.spec_from_file_location("model_new", os.path.join(sol_dir, setup["python_name"]))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["model_new"] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, "ModelNew"):
        raise AttributeError("the solution defines no ModelNew")
    return mod.ModelNew, native_ops


def _err(e: BaseException) -> dict:
    msg = f"{type(e).__name__}: {e}"
    oom = isinstance(e, MemoryError) or "can't allocate memory" in str(e) or "bad_alloc" in str(e) \
        or "Cannot allocate memory" in str(e)
    flood = isinstance(e, OSError) and e.errno == errno.EFBIG  # RLIMIT_FSIZE (Python ignores SIGXFSZ)
    kind = "harness_tampering" if isinstance(e, Tampering) else "out_of_memory" if oom else "output_limit" if flood else "runtime_error"
    return {"error": msg[:2000], "kind": kind, "trace": traceback.format_exc()[-3000:]}


class Server:
    def __init__(self, ch: wire.Channel, setup: dict):
        self.ch = ch
        self.setup = setup
        self.mode = setup["mode"]  # candidate | reference | compile
        self.blocker = None
        self.violations: dict[str, int] = {}
        self.timed_outputs: list = []
        self.prev_outputs: list = []
        self.reused = False
        self.pending = None
        self.device = setup.get("device", "cpu")
        flush = setup.get("flush_bytes", 0)
        if self.device != "cpu" and flush:
            flush = max(flush, 256 * 2**20)  # L2 thrash on GPUs (KernelBench uses 256 MB)
        self.flush_buf = torch.empty(max(1, flush // 4), dtype=torch.float32, device=self.device)

    def sync(self) -> None:
        if self.device != "cpu":
            torch.cuda.synchronize()  # device-wide: work on any stream is inside the timed region

    def inputs(self, blob: bytes):
        return _to(wire.loads_tensors_untrusted(blob), self.device)

    def send(self, header: dict, blob: bytes = b"") -> None:
        self.ch.send(header, blob)

    def recv(self) -> tuple[dict, bytes]:
        return self.ch.recv()

    def load(self, sd_blob: bytes) -> None:
        from shiftkit.kernels.problem import load_problem

        problem = load_problem(self.setup["problem_path"])
        sd = wire.loads_tensors_untrusted(sd_blob) if sd_blob else {}
        init = problem.init_inputs()
        self.ref = problem.module.Model(*init).eval()
        self.ref.load_state_dict(sd)
        self.ref.to(self.device)
        if self.mode == "candidate":
            from shiftkit.kernels.blocking import make_blocker

            blocker = make_blocker()  # bound before any candidate code runs (frozen allowlist inside)
            cls, native_ops = _import_candidate(self.setup)
            blocker.allow_native(native_ops)
            self.model = cls(*init)
            try:
                self.model.load_state_dict(sd)
            except Exception as e:  # noqa: BLE001
                raise StateDictError(str(e)) from None
            self.model.eval().to(self.device)
            if self.setup.get("block_ops", True):
                self.blocker = blocker
        elif self.mode == "compile":
            self.model = torch.compile(self.ref)
        else:
            self.model = self.ref

    def call(self, inputs, profiled: bool = False):
        """One forward under the blocker. ``profiled``: also under the autograd profiler, which records every
        dispatched op even while Python modes are disabled, as a second, independent op record."""
        if not profiled:
            return self._call(inputs)
        from torch.autograd.profiler import profile

        from shiftkit.kernels.blocking import profiled_escapes

        with profile(use_cpu=True, record_shapes=False) as prof:
            out = self._call(inputs)
        esc = profiled_escapes([e.name for e in prof.function_events], self.violations, self.blocker.native or frozenset())
        if esc:
            self.violations.update(esc)
        return out

    def _call(self, inputs):
        from shiftkit.kernels import runtime

        check_clean()
        runtime.KERNEL_CALLS[0] = 0
        if self.blocker is not None:
            self.blocker.native_calls = 0
        with torch.no_grad():
            if self.blocker is None:
                out = self.model(*inputs)
                self.sync()
                return out
            try:
                with self.blocker:
                    out = self.model(*inputs)
                    n = torch._C._len_torch_dispatch_stack()
                    if not n or torch._C._get_dispatch_stack_at(n - 1) is not self.blocker:
                        raise Tampering("the op blocker was removed from the dispatch stack during forward")
                self.sync()
                return out
            finally:
                self.violations = dict(self.blocker.violations)
                if self.blocker.python_ops:
                    self.violations.update({f"python_custom_op:{k}": v for k, v in self.blocker.python_ops.items()})

    def kernel_calls(self) -> int:
        from shiftkit.kernels import runtime

        return runtime.KERNEL_CALLS[0] + (self.blocker.native_calls if self.blocker is not None else 0)

    def check_reuse(self, out) -> None:
        new = set(_ptrs(out))
        old = {p for o in self.prev_outputs for p in _ptrs(o)}
        if new & old:
            self.reused = True

    def reply(self, cmd: str, header: dict, blob: bytes = b"") -> None:
        self.send({"reply_to": cmd, **header}, blob)

    def loop(self) -> None:
        while True:
            header, blob = self.recv()
            cmd = header.get("cmd")
            try:
                if cmd == "run":  # timed call: forward + in-window digests, nothing else
                    out = self.call(self.pending)
                    od = wire.sample_digest(out, int(header["nonce"]))
                    idg = wire.sample_digest(self.pending, int(header["nonce"]))
                    self.check_reuse(out)
                    self.timed_outputs.append(out)
                    self.prev_outputs = self.timed_outputs
                    self.reply(cmd, {"ok": True, "nonce": header["nonce"], "out_digest": od, "in_digest": idg,
                                     "kernel_calls": self.kernel_calls()})
                elif cmd == "trial":
                    inputs = self.inputs(blob)
                    mine = _clone(inputs)
                    if header.get("ref_first") and self.mode == "candidate":
                        with torch.no_grad():
                            r = self.ref(*_clone(inputs))
                        _poison(r)  # a no-op kernel that picks up this freed buffer returns NaN
                        del r
                    out = self.call(mine, profiled=self.mode == "candidate" and self.blocker is not None)
                    od = wire.sample_digest(out, int(header.get("nonce", 0)))
                    calls = self.kernel_calls()
                    self.check_reuse(out)
                    self.prev_outputs = (self.prev_outputs + [out])[-8:]
                    if not header.get("ref_first") and self.mode == "candidate":
                        with torch.no_grad():
                            r = self.ref(*_clone(inputs))
                        _poison(r)
                        del r
                    self.reply(cmd, {"ok": True, "violations": self.violations, "reused": self.reused,
                                     "inputs_digest": wire.digest(_to(mine, "cpu")), "kernel_calls": calls,
                                     "out_digest": od},
                               wire.dumps_tensors(_to(out, "cpu")))
                elif cmd == "prep":
                    self.pending = self.inputs(blob)
                    if self.flush_buf.numel() > 1:
                        self.flush_buf.add_(1.0)  # evict the last-level cache
                    self.sync()
                    check_clean()
                    self.reply(cmd, {"ok": True})
                elif cmd == "warmup":
                    self.pending = self.inputs(blob)
                    for _ in range(int(header.get("n", 1))):
                        self.call(_clone(self.pending))
                    self.reply(cmd, {"ok": True, "violations": self.violations})
                elif cmd == "collect":
                    outs, self.timed_outputs = self.timed_outputs, []
                    self.prev_outputs = outs[-1:]
                    self.reply(cmd, {"ok": True, "violations": self.violations, "reused": self.reused},
                               wire.dumps_tensors(_to(outs, "cpu")) if header.get("outputs", True) else b"")
                elif cmd == "exit":
                    self.reply(cmd, {"ok": True})
                    return
                else:
                    self.reply(str(cmd), {"ok": False, "error": f"unknown command {cmd}", "kind": "runtime_error"})
            except Exception as e:  # noqa: BLE001 - reported to the parent as a structured failure
                self.reply(str(cmd), {"ok": False, **_err(e), "violations": self.violations,
                                      **({"nonce": header.get("nonce")} if cmd == "run" else {})})


class StateDictError(Exception):
    pass


def _steady_allocator() -> None:
    """Keep freed heap memory mapped (no per-call mmap/munmap and first-touch page faults of fresh
    temporaries), the same for candidate and baselines: timing then measures compute, not page-fault luck."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks up to 32 MiB come from the heap
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: never give the top of the heap back
    except (OSError, AttributeError):
        pass


def _environ_block_has_secret() -> bool:
    try:
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
    except OSError:
        return False
    return any(k.split(b"=", 1)[0] == b"SHIFTKIT_KERNEL_SECRET_SEED" for k in block.split(b"\0"))


def worker_main(conn, setup: dict) -> None:
    log = os.open(setup["log_path"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    threads = int(setup.get("threads", 1))
    os.environ.clear()
    # the compile baseline keeps inductor's cache in the shared dir it may write (it was /tmp: private, lost)
    cache = setup.get("inductor_cache") or "/tmp/inductor"
    os.environ.update(jail.scrub_env({"OMP_NUM_THREADS": str(threads), "TORCHINDUCTOR_CACHE_DIR": cache}))
    ch = wire.Channel(conn.fileno())
    for path in setup.get("cgroup_procs", []):
        with open(path, "w") as f:
            f.write(str(os.getpid()))
    if setup.get("isolate", True):
        try:
            info = jail.enter(rw=setup.get("rw", []), hide=setup.get("hide", []), tmp_mb=int(setup.get("tmp_mb", 512)),
                              ro=setup.get("ro", []))
        except jail.JailError as e:
            if not setup.get("allow_unisolated"):
                ch.send({"reply_to": "hello", "isolation_error": f"sandbox unavailable: {e}"})
                os._exit(0)
            info = {"isolated": False, "reason": f"sandbox unavailable ({e}); allow_unisolated=true"}
    else:
        info = {"isolated": False, "reason": "isolation disabled (allow_unisolated=true, isolate=false)"}
    if _environ_block_has_secret():
        ch.send({"reply_to": "hello", "isolation_error": "the secret seed is in the worker's environment block "
                 "(the forkserver was started by other code with the secret set)"})
        os._exit(0)
    torch.set_num_threads(threads)
    _steady_allocator()
    limits = {"cpu_s": int(setup.get("cpu_s", 0)), "fsize_bytes": int(setup.get("max_output_bytes", 0)),
              "nofile": 256, "nproc": int(setup.get("nproc", 0))}
    if int(setup.get("mem_mb", 0)) > 0:
        limits["as_bytes"] = _vm_bytes() + int(setup["mem_mb"]) * 2**20
    jail.set_limits(limits)
    server = Server(ch, setup)
    server.reply("hello", {"ok": True, "pid": os.getpid(), "isolation": info})
    header, blob = server.recv()
    try:
        server.load(blob)
        server.reply("load", {"ok": True})
    except StateDictError as e:
        server.reply("load", {"ok": False, "kind": "state_dict_mismatch", "error": str(e)[:2000]})
        return
    except Exception as e:  # noqa: BLE001
        err = _err(e)
        if err["kind"] != "out_of_memory":
            err["kind"] = "load_error"
        server.reply("load", {"ok": False, **err, "stage": "load"})
        return
    server.loop()
    sys.stdout.flush()
    os._exit(0)


def _warm_up() -> None:
    """Run once in the forkserver, so every forked worker inherits warm state: the first
    TorchDispatchMode entry alone costs ~2 s (lazy imports), weights_only loading some ms."""
    import threading  # noqa: F401

    import torch.nn.modules.module  # noqa: F401
    from torch.overrides import _get_current_function_mode_stack  # noqa: F401

    from shiftkit.kernels import blocking, problem, runtime, solution  # noqa: F401

    from torch.autograd.profiler import profile

    with profile(use_cpu=True, record_shapes=False), blocking.make_blocker():
        torch.empty(1)
    x = [torch.zeros(2)]
    wire.loads_tensors_untrusted(wire.dumps_tensors(x))
    wire.digest(x)
    wire.sample_digest(x, 1)
    torch._C._dispatch_get_all_op_names()


_warm_up()
