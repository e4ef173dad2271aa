"""The evaluation worker: runs in a child process (forkserver with torch preloaded), untrusted.

It sandboxes itself first (network namespace where the OS allows; rlimits for memory, CPU time, output
size and core dumps), then loads the problem (for the in-worker reference copy) and the candidate, and
serves the parent's commands. It never sees expected outputs: the parent computes and compares them.
Everything the worker reports is treated as untrusted data by the parent.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
import traceback

import torch  # noqa: F401 - preloaded by the forkserver

from shiftkit.kernels import wire

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def isolate_network() -> dict:
    """Try ``unshare(CLONE_NEWUSER|CLONE_NEWNET)``; return what happened (never raises)."""
    uid, gid = os.getuid(), os.getgid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            return {"network_isolated": False, "reason": f"unshare failed: {os.strerror(err)}"}
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            try:
                with open(path, "w") as f:
                    f.write(text)
            except OSError:
                pass
        return {"network_isolated": True, "reason": "unshare(CLONE_NEWUSER|CLONE_NEWNET)"}
    except Exception as e:  # noqa: BLE001
        return {"network_isolated": False, "reason": f"{type(e).__name__}: {e}"}


def _vm_bytes() -> int:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def apply_limits(mem_mb: int, cpu_s: int, out_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if out_bytes > 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (out_bytes, out_bytes))
    if cpu_s > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    if mem_mb > 0:
        lim = _vm_bytes() + mem_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


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


def _import_candidate(setup: dict):
    import importlib.util

    from shiftkit.kernels import runtime
    from shiftkit.kernels.solution import BuildSpec

    runtime._PREBUILT_BACKEND[0] = setup["backend"]
    runtime.install_prebuilt(setup["builds"])
    for b in setup["builds"]:
        if b.get("workspace_ext"):
            spec = BuildSpec(**b["spec"])
            mod = runtime.load_built(spec, b["so_path"])
            sys.modules["kernel_ext"] = mod
            sys.modules["cuda_extension"] = mod
    sol_dir = setup["solution_dir"]
    sys.path.insert(0, sol_dir)
    spec = importlib.util.spec_from_file_location("model_new", os.path.join(sol_dir, setup["python_name"]))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["model_new"] = mod
    spec.loader.exec_module(mod)
    if not hasattr(mod, "ModelNew"):
        raise AttributeError("the solution defines no ModelNew")
    return mod.ModelNew


def _err(e: BaseException) -> dict:
    msg = f"{type(e).__name__}: {e}"
    oom = isinstance(e, MemoryError) or "can't allocate memory" in str(e) or "bad_alloc" in str(e) \
        or "Cannot allocate memory" in str(e)
    flood = isinstance(e, OSError) and e.errno == errno.EFBIG  # RLIMIT_FSIZE (Python ignores SIGXFSZ)
    kind = "out_of_memory" if oom else "output_limit" if flood else "runtime_error"
    return {"error": msg[:2000], "kind": kind,
            "trace": traceback.format_exc()[-3000:]}


class Server:
    def __init__(self, conn, setup: dict):
        self.conn = conn
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
        self.conn.send_bytes(wire.pack(header, blob))

    def recv(self) -> tuple[dict, bytes]:
        return wire.unpack(self.conn.recv_bytes())

    def load(self, sd_blob: bytes) -> None:
        from shiftkit.kernels.problem import load_problem

        problem = load_problem(self.setup["problem_path"])
        sd = wire.loads_tensors_untrusted(sd_blob) if sd_blob else {}
        init = problem.init_inputs()
        self.ref = problem.module.Model(*init).eval()
        self.ref.load_state_dict(sd)
        self.ref.to(self.device)
        if self.mode == "candidate":
            cls = _import_candidate(self.setup)
            self.model = cls(*init)
            try:
                self.model.load_state_dict(sd)
            except Exception as e:  # noqa: BLE001
                raise StateDictError(str(e)) from None
            self.model.eval().to(self.device)
            if self.setup.get("block_ops", True):
                from shiftkit.kernels.blocking import make_blocker

                self.blocker = make_blocker()
        elif self.mode == "compile":
            self.model = torch.compile(self.ref)
        else:
            self.model = self.ref

    def call(self, inputs):
        with torch.no_grad():
            if self.blocker is None:
                out = self.model(*inputs)
                self.sync()
                return out
            try:
                with self.blocker:
                    out = self.model(*inputs)
                self.sync()
                return out
            finally:
                self.violations = dict(self.blocker.violations)

    def check_reuse(self, out) -> None:
        new = set(_ptrs(out))
        old = {p for o in self.prev_outputs for p in _ptrs(o)}
        if new & old:
            self.reused = True

    def loop(self) -> None:
        while True:
            data = self.conn.recv_bytes()
            if data == b"R":  # timed call: nothing but the forward between the parent's clock reads
                try:
                    out = self.call(self.pending)
                except Exception as e:  # noqa: BLE001
                    self.send({"ok": False, **_err(e), "violations": self.violations})
                    continue
                self.check_reuse(out)  # before replying: the parent's CPU-time read then sees a quiet worker
                self.timed_outputs.append(out)
                self.prev_outputs = self.timed_outputs
                self.conn.send_bytes(b"D")
                continue
            header, blob = wire.unpack(data)
            cmd = header["cmd"]
            try:
                if cmd == "trial":
                    inputs = self.inputs(blob)
                    mine = _clone(inputs)
                    if header.get("ref_first") and self.mode == "candidate":
                        with torch.no_grad():
                            r = self.ref(*_clone(inputs))
                        _poison(r)  # a no-op kernel that picks up this freed buffer returns NaN
                        del r
                    out = self.call(mine)
                    self.check_reuse(out)
                    self.prev_outputs = (self.prev_outputs + [out])[-8:]
                    if not header.get("ref_first") and self.mode == "candidate":
                        with torch.no_grad():
                            r = self.ref(*_clone(inputs))
                        _poison(r)
                        del r
                    self.send({"ok": True, "violations": self.violations, "reused": self.reused,
                               "inputs_digest": wire.digest(_to(mine, "cpu"))}, wire.dumps_tensors(_to(out, "cpu")))
                elif cmd == "prep":
                    self.pending = self.inputs(blob)
                    if self.flush_buf.numel() > 1:
                        self.flush_buf.add_(1.0)  # evict the last-level cache
                    self.sync()
                    self.send({"ok": True})
                elif cmd == "warmup":
                    self.pending = self.inputs(blob)
                    for _ in range(int(header.get("n", 1))):
                        self.call(_clone(self.pending))
                    self.send({"ok": True, "violations": self.violations})
                elif cmd == "collect":
                    outs, self.timed_outputs = self.timed_outputs, []
                    self.prev_outputs = []
                    self.send({"ok": True, "violations": self.violations, "reused": self.reused},
                              wire.dumps_tensors(_to(outs, "cpu")))
                elif cmd == "exit":
                    self.send({"ok": True})
                    return
                else:
                    self.send({"ok": False, "error": f"unknown command {cmd}", "kind": "runtime_error"})
            except Exception as e:  # noqa: BLE001 - reported to the parent as a structured failure
                self.send({"ok": False, **_err(e), "violations": self.violations})


class StateDictError(Exception):
    pass


def worker_main(conn, setup: dict) -> None:
    log = os.open(setup["log_path"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    net = isolate_network() if setup.get("isolate_network", True) else {"network_isolated": False, "reason": "disabled"}
    threads = int(setup.get("threads", 1))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    if setup.get("sandbox", True):
        apply_limits(int(setup.get("mem_mb", 0)), int(setup.get("cpu_s", 0)), int(setup.get("max_output_bytes", 0)))
    server = Server(conn, setup)
    server.send({"ok": True, "hello": True, "pid": os.getpid(), **net})
    header, blob = server.recv()
    try:
        server.load(blob)
        server.send({"ok": True})
    except StateDictError as e:
        server.send({"ok": False, "kind": "state_dict_mismatch", "error": str(e)[:2000]})
        return
    except Exception as e:  # noqa: BLE001
        err = _err(e)
        if err["kind"] != "out_of_memory":
            err["kind"] = "load_error"
        server.send({"ok": False, **err, "stage": "load"})
        return
    server.loop()
    sys.stdout.flush()
    os._exit(0)


def _warm_up() -> None:
    """Run once in the forkserver, so every forked worker inherits warm state: the first
    TorchDispatchMode entry alone costs ~2 s (lazy imports), weights_only loading some ms."""
    from shiftkit.kernels import blocking, problem, runtime, solution  # noqa: F401

    with blocking.make_blocker():
        torch.empty(1)
    x = [torch.zeros(2)]
    wire.loads_tensors_untrusted(wire.dumps_tensors(x))
    wire.digest(x)


_warm_up()
