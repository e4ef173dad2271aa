"""``evaluate(problem, solution, config) -> Result``: the evaluation protocol, one step per function.

1. :func:`static_findings`  - pure source checks (static.py)
2. :func:`build_solution`   - content-hash-cached builds with structured compile errors (build.py)
3. :class:`sandbox.Worker`  - the candidate runs in a jailed worker tree (jail.py); checker and clock stay here
4. op blocking              - a TorchDispatchMode inside the worker (blocking.py), violations reported
5. :func:`check_correctness`- seeded trials (secret seed mixed in), both orders, determinism, shape variants
6. :func:`admit_problem`    - degenerate-task guard (cached per problem)
7. :func:`paired_profile`   - candidate, eager and compile timed interleaved on the same inputs, re-checked
8. reward.py                - paired milestones with confidence intervals / log-speedup; 9. metrics.py
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import correctness as C
from shiftkit.kernels import jail, static, stats, wire
from shiftkit.kernels.backends import get_backend, machine_id
from shiftkit.kernels.build import BuildResult, CompileError, build, default_cache_dir
from shiftkit.kernels.findings import Finding, errors
from shiftkit.kernels.problem import Problem, load_problem
from shiftkit.kernels.reward import get_reward_fn, paired_milestone_reward, threshold
from shiftkit.kernels.sandbox import IsolationUnavailable, Worker, WorkerFailure
from shiftkit.kernels.solution import Solution, load_solution

_SECRET: list[int] = []  # read lazily in the parent only (never at import: the forkserver imports this module)


def _process_secret() -> int:
    if not _SECRET:
        _SECRET.append(int(os.environ.get("SHIFTKIT_KERNEL_SECRET_SEED") or secrets.randbits(31)))
    return _SECRET[0]


@dataclass
class EvalConfig:
    backend: str = "cpu"
    profile: bool = True  # False: compile + verify only (cheap mode for agent tools)
    trials: int = 5
    seed: int = 42
    secret_seed: int | None = None  # None: $SHIFTKIT_KERNEL_SECRET_SEED or random per process
    tolerance: str = "default"  # default (fp32 1e-4) | cuda_agent (1e-2) | strict
    atol: float | None = None
    rtol: float | None = None
    determinism: bool = True
    shape_variants: bool = True
    static_checks: bool = True
    stop_on_static: bool = True
    block_ops: bool = True
    check_degenerate: bool = True
    warmup: int = 3
    timed_calls: int = 30  # paired rounds before the first decision, split evenly over the first blocks
    max_timed_calls: int = 40  # budget of paired rounds: blocks are added while an interval straddles a threshold
    timing_blocks: int = 3  # independent timing blocks (fresh candidate and baseline workers each) before deciding
    min_block_rounds: int = 10  # fewer blocks when timed_calls cannot give each this many rounds
    respawn_blocks: bool = True  # False: every block reuses the first block's workers (diagnostic only)
    pin_cpu: bool = True  # pin all workers of a block to one CPU (blocks rotate over the allowed CPUs)
    ci_level: float = 0.95
    recheck_timed: bool = True
    baseline_compile: bool = True
    floor_bandwidth_factor: float = 4.0  # physical floor: bytes moved / (factor x measured memcpy bandwidth); 0 = off
    flush_llc: bool = True
    llc_flush_mb: int = 0  # 0: twice the detected last-level cache
    threads: int = 1
    timeout_s: float = 120.0
    compile_timeout_s: float = 300.0
    build_jobs: int = 2
    mem_limit_mb: int = 4096
    max_output_bytes: int = 1_000_000
    max_frame_mb: int = 512  # cap on any frame from a worker
    pids_max: int = 64  # tasks (threads + processes) in a worker's tree
    allow_unisolated: bool = False  # run even where the sandbox is unavailable; the result is marked untrusted
    implausible_speedup: float = 10.0
    timer: str = "auto"  # wall | cpu | auto (cpu for the cpu backend with 1 thread, else wall)
    reward: str = "milestone"  # milestone | log_speedup
    margin: float = 0.05
    cache_dir: str = ""  # "": $SHIFTKIT_KERNEL_CACHE or .cache/kernels

    def validate(self) -> None:
        get_backend(self.backend)
        from shiftkit.kernels.reward import REWARDS

        if self.reward not in REWARDS:
            raise ShiftkitError(f"unknown reward {self.reward!r}; valid: {', '.join(REWARDS)}")
        if self.tolerance not in C.TOLERANCE_PRESETS:
            raise ShiftkitError(f"unknown tolerance {self.tolerance!r}; valid: {', '.join(C.TOLERANCE_PRESETS)}")
        if self.timer not in ("wall", "cpu", "auto"):
            raise ShiftkitError(f"unknown timer {self.timer!r}; valid: wall, cpu, auto")
        if self.trials < 1 or self.timed_calls < 1 or self.threads < 1 or self.timing_blocks < 1:
            raise ShiftkitError("trials, timed_calls, timing_blocks and threads must be >= 1")
        if not 0.5 < self.ci_level < 1:
            raise ShiftkitError("ci_level must be in (0.5, 1)")

    @property
    def cache(self) -> Path:
        return Path(self.cache_dir).resolve() if self.cache_dir else default_cache_dir()

    @property
    def effective_timer(self) -> str:
        if self.timer != "auto":
            return self.timer
        return "cpu" if self.backend == "cpu" and self.threads == 1 else "wall"

    @property
    def secret(self) -> int:
        return _process_secret() if self.secret_seed is None else int(self.secret_seed)


@dataclass
class Result:
    problem: str
    solution: str
    compiled: bool = False
    correct: bool = False
    findings: list[Finding] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    reward: float = -1.0
    reason: str = ""
    compile_errors: list[CompileError] = field(default_factory=list)
    max_abs_diff: float | None = None
    builds: list[dict] = field(default_factory=list)
    sandbox: dict = field(default_factory=dict)
    seconds: float = 0.0
    stage: str = "static"
    inconclusive: bool = False  # a paired interval straddled a threshold after the whole sample budget
    paired: dict = field(default_factory=dict)  # per baseline: speedup, CI, decision, rounds

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["findings"] = [f.to_dict() for f in self.findings]
        d["compile_errors"] = [e.to_dict() for e in self.compile_errors]
        return d

    def codes(self, severity: str | None = "error") -> list[str]:
        return [f.code for f in self.findings if severity is None or f.severity == severity]


def _resolve(problem, solution, config: EvalConfig) -> tuple[Problem, Solution]:
    p = problem if isinstance(problem, Problem) else load_problem(problem)
    s = solution if isinstance(solution, Solution) else load_solution(solution, config.backend)
    return p, s


# ----------------------------------------------------------------------------- 1. static

def static_findings(solution: Solution, allow_reduced_precision: bool = False) -> list[Finding]:
    out = list(solution.findings)
    out += static.check_python(solution.python_source, allow_reduced_precision)
    for rel, text in solution.python_files.items():  # every Python file of a workspace, not just model_new.py
        out += [dataclasses.replace(f, where=f"{rel} {f.where or ''}".strip()) for f in static.check_python(text, allow_reduced_precision)]
    for spec in solution.specs:
        for rel, text in spec.sources.items():
            cuda = spec.backend == "cuda" or rel.endswith((".cu", ".cuh"))
            out += [dataclasses.replace(f, where=f"{spec.name}/{rel} {f.where}") for f in static.check_cpp(text, allow_reduced_precision, cuda)]
        out += static.check_flags(spec.extra_cflags, allow_reduced_precision, spec.extra_cuda_cflags, spec.extra_ldflags)
    return out


# ----------------------------------------------------------------------------- 2. build

def build_solution(solution: Solution, config: EvalConfig) -> list[BuildResult]:
    """Build every spec (parallel builds are safe: per-key locks)."""
    return [build(s, config.cache, config.compile_timeout_s, config.build_jobs, isolate=not _unisolated(config))
            for s in solution.specs]


_PROBE: dict[str, str] = {}


def isolation_problem() -> str:
    """'' where the sandbox works here, else why not (probed once per process, by jailing a throwaway child)."""
    if "why" not in _PROBE:
        from shiftkit.kernels import jail

        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                jail.enter()
                os.write(w, b"ok")
            except BaseException as e:  # noqa: BLE001
                os.write(w, str(e).encode()[:500] or b"?")
            os._exit(0)
        os.close(w)
        msg = b""
        while True:
            b = os.read(r, 1024)
            if not b:
                break
            msg += b
        os.close(r)
        os.waitpid(pid, 0)
        _PROBE["why"] = "" if msg == b"ok" else (msg.decode(errors="replace") or "sandbox probe died")
    return _PROBE["why"]


def _unisolated(config: EvalConfig) -> bool:
    """Run without the sandbox? Only with allow_unisolated where it is unavailable; else fail closed."""
    why = isolation_problem()
    if not why:
        return False
    if not config.allow_unisolated:
        raise ShiftkitError(f"the evaluation sandbox is unavailable here ({why}); refusing to run candidate code "
                            "(set allow_unisolated=true to run anyway; the result is then marked untrusted)")
    return True


def compile_only(problem, solution, config: EvalConfig | None = None) -> Result:
    """Static checks + build, no execution: structured compile errors for agent tools."""
    config = config or EvalConfig()
    t0 = time.perf_counter()
    p, s = _resolve(problem, solution, config)
    res = Result(problem=p.name, solution=str(s.path))
    if config.static_checks:
        res.findings = static_findings(s, p.allow_reduced_precision)
    else:
        res.findings = list(s.findings)
    _do_build(res, s, config)
    res.reward, res.reason = (0.0, "compiled") if res.compiled else (-1.0, res.reason)
    res.seconds = time.perf_counter() - t0
    return res


def _do_build(res: Result, s: Solution, config: EvalConfig) -> list[BuildResult]:
    res.stage = "build"
    if errors([f for f in res.findings if f.code == "dynamic_sources" or f.code == "syntax_error"]):
        res.reason = "sources cannot be extracted: " + errors(res.findings)[0].message
        return []
    builds = build_solution(s, config)
    res.builds = [b.to_dict() | {"log_tail": b.log_tail[-800:]} for b in builds]
    res.compile_errors = [e for b in builds for e in b.errors]
    res.compiled = all(b.ok for b in builds)
    if not res.compiled:
        for e in res.compile_errors:
            if e.message.startswith("calls vendor library"):
                res.findings.append(Finding("vendor_library", e.message, "error", "link"))
            elif e.message.startswith("build flag"):
                res.findings.append(Finding("build_flag", e.message, "error", "build"))
        res.findings.append(Finding("compile_error", "; ".join(f"{e.file}:{e.line}: {e.message}" for e in res.compile_errors[:5]), "error"))
        res.reason = "compile error: " + (res.compile_errors[0].message if res.compile_errors else "unknown")
    return builds


# ----------------------------------------------------------------------------- 6. problem admission

_ADMISSION: dict[tuple, list[Finding]] = {}


def admit_problem(problem: Problem, config: EvalConfig) -> list[Finding]:
    """Degenerate-task guard: the reference output must not be all-zero or constant (within tolerance)
    and must change with the inputs. Cached per (problem, tolerance)."""
    import torch

    key = (problem.hash, config.tolerance, config.atol, config.rtol)
    if key in _ADMISSION:
        return _ADMISSION[key]
    model = problem.make_model(config.seed)
    with torch.no_grad():
        outs = [model(*problem.inputs(config.seed + 7919 * k)) for k in range(2)]
    exp_dtype = _first_dtype(outs[0])
    atol, rtol = C.tolerance_for(exp_dtype, config.tolerance, config.atol, config.rtol)
    found = []
    d = C.degeneracy(outs[0], atol, rtol)
    if d:
        found.append(Finding("degenerate_problem", f"reference output is {d.replace('_', '-')} within atol={atol:g}, rtol={rtol:g}"))
    elif C.same_outputs(outs[0], outs[1], atol, rtol):
        found.append(Finding("degenerate_problem", "reference output does not change with the inputs"))
    _ADMISSION[key] = found
    return found


def _first_dtype(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    if isinstance(x, (list, tuple)) and x:
        return _first_dtype(x[0])
    if isinstance(x, dict) and x:
        return _first_dtype(next(iter(x.values())))
    return "float32"


# ----------------------------------------------------------------------------- 3. worker

FLUSH_CAP = 64 * 2**20  # a VM may report the whole host L3 (480 MB here); its share is far smaller


def _flush_bytes(config: EvalConfig) -> int:
    if not config.flush_llc:
        return 0
    if config.llc_flush_mb:
        return config.llc_flush_mb * 2**20
    best = 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in base.glob("index*"):
        try:
            txt = (idx / "size").read_text().strip()
            n = int(txt[:-1]) * (1024 if txt.endswith("K") else 2**20 if txt.endswith("M") else 1) if txt[-1] in "KM" else int(txt)
            best = max(best, n)
        except (OSError, ValueError):
            continue
    return min(2 * (best or 32 * 2**20), FLUSH_CAP)


def _read_paths(problem: Problem, solution: Solution | None, builds: list[BuildResult]) -> list[str]:
    """Dirs the worker must read even where its private /tmp covers them (problem, solution, artefacts)."""
    dirs = {str(Path(problem.path).resolve().parent)}
    if solution is not None:
        dirs.add(str(solution.path if solution.layout == "workspace" else solution.path.parent))
    dirs |= {str(Path(b.so_path).resolve().parent) for b in builds if b.so_path}
    return sorted(dirs)


def start_worker(problem: Problem, solution: Solution | None, builds: list[BuildResult], config: EvalConfig,
                 mode: str = "candidate") -> Worker:
    entries = []
    if solution is not None:
        for spec, b in zip(solution.specs, builds):
            entries.append({"spec_key": spec.key(), "so_path": b.so_path, "so_sha256": b.sha256,
                            "spec": dataclasses.asdict(spec),
                            "workspace_ext": solution.layout == "workspace" and spec.name == "kernel_ext"})
    cand = mode == "candidate"
    rw, hide = [], []
    inductor = config.cache / "inductor"  # inductor's on-disk cache, shared between evaluations
    inductor.mkdir(parents=True, exist_ok=True)  # exists before any candidate starts, so it can be hidden
    if mode == "compile":  # trusted reference code: the only worker that may write (and read) it
        rw.append(str(inductor))
    elif cand:
        hide.append(str(inductor))
    setup = {
        "mode": mode, "problem_path": str(problem.path), "backend": config.backend,
        "solution_dir": str(solution.path if solution and solution.layout == "workspace" else (solution.path.parent if solution else "")),
        "layout": solution.layout if solution else "", "python_name": solution.python_name if solution else "",
        "builds": entries, "threads": config.threads, "mem_mb": config.mem_limit_mb if cand else 0,
        "cpu_s": int(config.timeout_s * 2) if cand else 0,
        "max_output_bytes": config.max_output_bytes if cand else 0,
        "isolate": not _unisolated(config), "allow_unisolated": config.allow_unisolated, "rw": rw, "hide": hide,
        "inductor_cache": str(inductor) if mode == "compile" else "",
        "ro": _read_paths(problem, solution, builds) + jail.runtime_paths(),  # the venv may lie under /tmp
        "block_ops": config.block_ops, "flush_bytes": _flush_bytes(config),
        "nproc": (config.pids_max + 4 * config.threads) if cand and not jail.cgroups_usable() else 0,
        "device": get_backend(config.backend).device,
    }
    mem = (config.mem_limit_mb + 3072) << 20 if cand else 0
    pids = config.pids_max + 4 * config.threads if cand else 512
    try:
        return Worker(setup, config.timeout_s if cand else max(config.timeout_s, 600.0), config.max_frame_mb << 20,
                      pids_max=pids, mem_bytes=mem)
    except IsolationUnavailable as e:
        raise ShiftkitError(f"{e}; set allow_unisolated=true to run without it (untrusted result)") from None


def _load_in_worker(w: Worker, problem: Problem, config: EvalConfig) -> None:
    sd = problem.make_model(config.seed).state_dict()
    header, _ = w.request({"cmd": "load"}, wire.dumps_tensors(dict(sd)), max_blob=0)
    if not header.get("ok"):
        raise WorkerFailure(header.get("kind", "load_error"), header.get("error", "load failed"), header.get("trace", ""))


# ----------------------------------------------------------------------------- 5. correctness

def _to(x, device):
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device) if x.device.type != device else x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _clone(x):
    import torch

    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    return x


class _Trials:
    """Parent-side bookkeeping shared by correctness and profiling."""

    def __init__(self, w: Worker, problem: Problem, config: EvalConfig, solution: Solution | None = None):
        self.w, self.p, self.c = w, problem, config
        self.device = get_backend(config.backend).device
        self.model = problem.make_model(config.seed).to(self.device)
        self.base_tasks = w.base_tasks
        self.last_calls: int | None = None
        self.findings: list[Finding] = []
        self.max_diff = 0.0

    def for_worker(self, w: Worker) -> "_Trials":
        """The same bookkeeping (findings list and reference model shared) for another candidate worker."""
        t = copy.copy(self)
        t.w, t.base_tasks, t.last_calls = w, w.base_tasks, None
        return t

    def add(self, f: Finding) -> None:
        if not any(x.code == f.code for x in self.findings):
            self.findings.append(f)

    def expected(self, inputs):
        """The reference output, computed here in the parent (after the candidate replied)."""
        import torch

        with torch.no_grad():
            out = self.model(*_to(inputs, self.device))
        return _to(out, "cpu")

    def check_header(self, h: dict, where: str) -> None:
        v = h.get("violations") or {}
        if v:
            ops = ", ".join(f"{k} x{n}" for k, n in sorted(v.items()))
            self.add(Finding("blocked_torch_op", f"torch ops ran inside ModelNew.forward: {ops}", "error", where))
        if h.get("reused"):
            self.add(Finding("reused_output", "forward returned storage it had already returned for other inputs", "error", where))
        self.last_calls = h.get("kernel_calls")
        self.check_tasks(where)

    def check_decoy(self, where: str) -> None:
        """After an output was judged correct: it must have come from a built kernel."""
        if self.last_calls == 0:
            self.add(Finding("decoy_kernel", "no built kernel was called during the forward (the result came from elsewhere)", "error", where))

    def check_tasks(self, where: str) -> None:
        allowance = 2 * (self.c.threads - 1)
        n = self.w.tasks()
        if n > self.base_tasks + allowance >= 0:
            self.add(Finding("thread_spawned", f"the worker's tree has {n} tasks (baseline {self.base_tasks}, allowed +{allowance})", "error", where))

    def run_trial(self, inputs, ref_first: bool, where: str):
        nonce = secrets.randbits(62)
        h, blob = self.w.request({"cmd": "trial", "ref_first": ref_first, "nonce": nonce}, wire.dumps_tensors(inputs))
        if not h.get("ok") and h.get("violations"):
            self.check_header(h, where)  # the forward raised because a torch op was blocked
            return None
        if not h.get("ok"):
            raise WorkerFailure(h.get("kind", "runtime_error"), h.get("error", "forward failed"), h.get("trace", ""))
        self.check_header(h, where)
        try:
            got = wire.loads_tensors_untrusted(blob)
        except Exception as e:  # noqa: BLE001 - a subclass or foreign object in the output
            self.add(Finding("output_type", f"output is not plain tensors/containers (tensor subclass?): {str(e).splitlines()[0][:200]}", "error", where))
            return None
        if h.get("inputs_digest") != wire.digest(inputs):
            self.add(Finding("input_mutated", "forward modified its inputs (digest of the inputs changed)", "error", where))
        bad = C.layout_problem(got)
        if bad:
            self.add(Finding("output_layout", bad, "error", where))
            return None
        if wire.sample_digest(got, nonce) != h.get("out_digest"):
            self.add(Finding("lazy_output", "the output changed after forward returned (work after the call)", "error", where))
            return None
        return got

    def judge(self, expected, out, where: str, code_override: str | None = None) -> bool:
        """Compare one output with the reference; record the finding (``code_override`` renames any failure)."""
        if self.c.check_degenerate:
            atol, rtol = C.tolerance_for(_first_dtype(expected), self.c.tolerance, self.c.atol, self.c.rtol)
            kind = C.degeneracy(out, atol, rtol)
            if kind and not C.degeneracy(expected, atol, rtol):
                self.add(Finding("degenerate_output", f"output is {kind.replace('_', '-')} while the reference is not", "error", where))
                return False
        code, msg, diff = C.compare(expected, out, self.c.tolerance, self.c.atol, self.c.rtol)
        if code is None:
            self.max_diff = max(self.max_diff, diff)
            return True
        self.add(Finding(code_override or code, msg, "error", where))
        return False


def check_correctness(t: _Trials) -> bool:
    """Trials with fresh seeded inputs (secret mixed in), alternating reference-first/candidate-first,
    input-sensitivity, a determinism re-run and shape variants. Expected outputs are computed only after
    the candidate replied. Stops at the first error."""
    c, p = t.c, t.p
    outs, exps, first_inputs = [], [], None
    for k in range(c.trials):
        inputs = p.inputs(C.mix_seed(c.seed + k, c.secret))
        out = t.run_trial(inputs, ref_first=(k % 2 == 0), where=f"trial {k}")
        if out is None or errors(t.findings):
            return False
        exp = t.expected(inputs)
        if not t.judge(exp, out, f"trial {k}"):
            return False
        t.check_decoy(f"trial {k}")
        if errors(t.findings):
            return False
        if first_inputs is None:
            first_inputs = inputs
        outs.append(out)
        exps.append(exp)
    if c.check_degenerate and len(outs) >= 2:
        atol, rtol = C.tolerance_for(_first_dtype(exps[0]), c.tolerance, c.atol, c.rtol)
        if C.same_outputs(outs[0], outs[1], atol, rtol) and not C.same_outputs(exps[0], exps[1], atol, rtol):
            t.add(Finding("degenerate_output", "output does not change with the inputs", "error", "trials"))
            return False
    if c.determinism:
        again = t.run_trial(first_inputs, ref_first=False, where="determinism")
        if again is None or errors(t.findings):
            return False
        code, msg, _ = C.compare(outs[0], again, c.tolerance, c.atol, c.rtol)
        if code:
            t.add(Finding("nondeterministic", f"second run on identical inputs differs: {msg}", "error", "determinism"))
            return False
    if c.shape_variants:
        for i, var in enumerate(p.shape_variants):
            inputs = p.inputs(C.mix_seed(c.seed + 500 + i, c.secret), var)
            out = t.run_trial(inputs, ref_first=bool(i % 2), where=f"shape variant {var}")
            if out is None or errors(t.findings):
                return False
            if not t.judge(t.expected(inputs), out, f"shape variant {var}", "shape_variant_mismatch"):
                return False
    return True


# ----------------------------------------------------------------------------- 7. paired profiling

_BANDWIDTH: dict[str, float] = {}


def memory_bandwidth(device: str = "cpu") -> float:
    """Bytes/s of a copy (read + write) on ``device``: 64 MiB single-thread on the CPU, 1 GiB on a GPU
    (synchronised), best of 3, measured once per process."""
    if device not in _BANDWIDTH:
        import torch

        n = (16 << 20) if device == "cpu" else (256 << 20)
        x = torch.ones(n, device=device)
        y = torch.empty_like(x)
        best = math.inf
        for _ in range(3):
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            y.copy_(x)
            if device != "cpu":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        _BANDWIDTH[device] = 2 * n * 4 / best
        del x, y
    return _BANDWIDTH[device]


def _nbytes(x) -> int:
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values())
    return 0


def timing_summary(wall: list[int], cpu: list[int], timer: str) -> dict:
    """Wall and on-CPU statistics; ``median_ms``/``iqr_ms`` follow the chosen timer."""
    w = stats.summarize(wall)
    d = {"wall_median_ms": w["median_ms"], "wall_iqr_ms": w["iqr_ms"], "times_ms": [x / 1e6 for x in wall], "n": w["n"]}
    if cpu and min(cpu) >= 0:
        c = stats.summarize(cpu)
        d |= {"cpu_median_ms": c["median_ms"], "cpu_iqr_ms": c["iqr_ms"], "cpu_times_ms": [x / 1e6 for x in cpu]}
    else:
        timer = "wall"
    src = "cpu" if timer == "cpu" else "wall"
    return d | {"timer": src, "median_ms": d[f"{src}_median_ms"], "iqr_ms": d[f"{src}_iqr_ms"]}


def _ok(h: dict, what: str) -> None:
    if not h.get("ok"):
        raise WorkerFailure(h.get("kind", "runtime_error"), h.get("error", f"{what} failed"), h.get("trace", ""),
                            violations=h.get("violations"))


class _Paired:
    """One timing block: candidate and baselines timed interleaved: each round the same fresh inputs go to
    every party, in a rotating (and every other cycle reversed) order, each call preceded by the same LLC
    flush. Round numbers are global over the blocks of an evaluation (``first`` is this block's first)."""

    def __init__(self, t: _Trials, parties: dict[str, Worker], first: int = 0):
        self.t, self.c, self.p = t, t.c, t.p
        self.parties = parties
        self.names = list(parties)
        self.wall = {n: [] for n in parties}
        self.cpu = {n: [] for n in parties}
        self.outside = {n: [] for n in parties}  # per round: CPU ns outside the timed call (prep, flush, checks)
        self.first = first
        self.rounds = first  # global index of the next round
        self.pending: list[tuple[int, int, dict, str]] = []  # (round, nonce, inputs, reported out digest)
        self.checked = 0
        self.io_bytes = 0

    def round(self) -> None:
        c, r = self.c, self.rounds
        inputs = self.p.inputs(C.mix_seed(c.seed + 1000 + r, c.secret))
        blob = wire.dumps_tensors(inputs)
        nonce = secrets.randbits(62)
        in_dig = wire.sample_digest(inputs, nonce)
        k = r % len(self.names)
        order = self.names[k:] + self.names[:k]
        if (r // len(self.names)) % 2:
            order = order[::-1]
        for name in order:
            w = self.parties[name]
            w.deadline = time.monotonic() + c.timeout_s  # in the timing phase, timeout_s bounds every single call
            c0 = w.cpu_ns()
            _ok(w.request({"cmd": "prep"}, blob, max_blob=0)[0], "prep")
            c1 = w.cpu_ns()
            wall, cpu, h = w.timed_call(nonce)
            self.outside[name].append(max(0, c1 - c0))
            self.wall[name].append(wall)
            self.cpu[name].append(cpu)
            if name == "candidate":
                self.t.check_header(h, f"timed call {r}")
                self.t.check_decoy(f"timed call {r}")
                if h.get("in_digest") != in_dig:
                    self.t.add(Finding("input_mutated", "inputs differ after a timed call (in-place work during timing)", "error", f"timed call {r}"))
                self.pending.append((r, nonce, inputs, h.get("out_digest")))
        self.rounds += 1
        if len(self.pending) >= 10:
            self.recheck()

    def recheck(self) -> None:
        """Collect the candidate's timed outputs: layout, in-window digest vs the bytes received, and the
        reference (every output)."""
        if not self.pending:
            return
        t, w = self.t, self.parties["candidate"]
        w.deadline = time.monotonic() + self.c.timeout_s
        h, blob = w.request({"cmd": "collect", "outputs": True})
        _ok(h, "collect")
        t.check_header(h, "timing")
        try:
            outs = wire.loads_tensors_untrusted(blob)
        except Exception as e:  # noqa: BLE001
            t.add(Finding("output_type", f"timed output is not plain tensors: {str(e)[:200]}", "error", "timing"))
            outs = []
        if not isinstance(outs, list) or len(outs) != len(self.pending):
            t.add(Finding("protocol_violation", "collect returned a different number of timed outputs", "error", "timing"))
            outs = []
        for (r, nonce, inputs, dig), out in zip(self.pending, outs):
            where = f"timed call {r}"
            bad = C.layout_problem(out)
            if bad:
                t.add(Finding("output_layout", bad, "error", where))
                break
            if wire.sample_digest(out, nonce) != dig:
                t.add(Finding("lazy_output", "the output changed after the timed call replied (work outside the timed window)", "error", where))
                break
            if not self.io_bytes:
                self.io_bytes = _nbytes(inputs) + _nbytes(out)
            if self.c.recheck_timed:  # every timed output: a fresh block's worker cannot know which rounds count
                if not t.judge(t.expected(inputs), out, where, "timed_output_mismatch"):
                    break
                self.checked += 1
        self.pending = []

    def times(self, name: str, timer: str) -> list[int]:
        return self.cpu[name] if timer == "cpu" else self.wall[name]


def untimed_work_bound(cand_median_ns: float, eager_outside_ns: float) -> float:
    """Pure: how much more CPU per round (median of paired differences) the candidate may use outside its
    timed calls than the eager baseline before it is ``untimed_work``: the larger of 2 ms, half the candidate's
    own time and a quarter of the baseline's outside time (load noise on that 64 MB flush + decode is ~20 %)."""
    return max(2e6, 0.5 * cand_median_ns, 0.25 * eager_outside_ns)


def block_plan(timed_calls: int, timing_blocks: int, max_timed_calls: int, min_rounds: int = 10) -> tuple[int, int, int]:
    """Pure: (blocks before the first decision, rounds per block, most blocks within the round budget).
    A block has at least ``min_rounds`` rounds (fewer blocks when ``timed_calls`` is small); one block is
    never extended (an interval over blocks needs two to start with)."""
    n0 = max(1, min(timing_blocks, timed_calls // max(1, min_rounds)))
    per = -(-timed_calls // n0)
    return n0, per, n0 if n0 == 1 else max(n0, max_timed_calls // per)


def block_decisions(blocks: list[dict[str, list[float]]], thr: float, level: float) -> tuple[dict, dict]:
    """Pure: per baseline, the interval of the paired speedup (log space) and its decision from per-block
    per-round log ratios (``blocks[i][baseline]``). Several blocks: the Student-t interval over the block
    medians (:func:`stats.blocks_ci`, between-process variance included). One block: the order-statistic
    interval of its rounds' median (within-process noise only)."""
    cis, decisions = {}, {}
    for b in blocks[0] if blocks else {}:
        if len(blocks) == 1:
            cis[b] = stats.median_ci(blocks[0][b], level)
        else:
            cis[b] = stats.blocks_ci(stats.block_values([blk[b] for blk in blocks]), level)
        decisions[b] = stats.decide(cis[b], thr)
    return cis, decisions


def _pin_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def paired_profile(t: _Trials, solution: Solution | None = None, builds: list[BuildResult] | None = None) -> tuple[dict, dict, bool]:
    """Time the candidate against eager (and torch.compile) interleaved, in independent blocks: each block
    has its own fresh candidate and baseline workers (the first block reuses the checked candidate worker),
    all pinned to one CPU, equally warmed up, then ``per`` paired rounds. Each milestone is decided from the
    interval over the block-level ratios, adding blocks (up to ``max_timed_calls`` rounds) while an interval
    straddles the threshold. Returns (timings, paired stats, inconclusive)."""
    c, p = t.c, t.p
    n0, per, max_blocks = block_plan(c.timed_calls, c.timing_blocks, c.max_timed_calls, c.min_block_rounds)
    kinds = ["eager"] + (["compile"] if c.baseline_compile else [])
    cpus = _pin_cpus() if c.pin_cpu else []
    timer = c.effective_timer
    if timer == "cpu" and t.w.cpu_ns() < 0:
        timer = "wall"  # no whole-tree CPU accounting here: wall time, still paired
    thr = threshold(c.margin)
    warm = wire.dumps_tensors(p.inputs(C.mix_seed(c.seed + 999, c.secret)))
    done: list[_Paired] = []
    logr: list[dict[str, list[float]]] = []
    block_info: list[dict] = []
    kept: dict[str, Worker] = {}  # respawn_blocks=False: the first block's workers, reused
    cis: dict[str, tuple] = {}
    decisions: dict[str, str] = {}
    need = False
    started: list[Worker] = []
    try:
        while len(done) < max_blocks:
            i = len(done)
            parties: dict[str, Worker] = {}
            if kept:
                parties = dict(kept)
                bt = t.for_worker(parties["candidate"])
            else:
                if i == 0 or builds is None:
                    parties["candidate"] = t.w
                    bt = t
                else:
                    w = start_worker(p, solution, builds, c)
                    started.append(w)
                    _load_in_worker(w, p, c)
                    parties["candidate"] = w
                    bt = t.for_worker(w)
                    bt.check_tasks(f"block {i} import")
                for kind in kinds:
                    w = start_worker(p, None, [], c, mode="reference" if kind == "eager" else "compile")
                    started.append(w)
                    _load_in_worker(w, p, c)
                    parties[kind] = w
                if not c.respawn_blocks:
                    kept = dict(parties)
            cpu = cpus[i % len(cpus)] if cpus else None
            pinned = cpu is not None and all(w.pin(cpu) for w in parties.values())
            for name, w in parties.items():
                w.deadline = time.monotonic() + c.timeout_s
                h, _ = w.request({"cmd": "warmup", "n": c.warmup}, warm, max_blob=0)
                if name == "candidate" and not h.get("ok") and h.get("violations"):
                    bt.check_header(h, "warm-up")
                    return {}, {}, False
                _ok(h, f"{name} warm-up")
            pr = _Paired(bt, parties, first=i * per)
            while pr.rounds < (i + 1) * per and not errors(t.findings):
                pr.round()
            pr.recheck()
            if errors(t.findings):
                return {}, {}, False
            done.append(pr)
            logr.append({b: stats.log_ratios(pr.times(b, timer), pr.times("candidate", timer)) for b in kinds})
            block_info.append({"cpu": cpu if pinned else None, "rounds": pr.rounds - pr.first,
                               **{b: math.exp(stats.median(logr[-1][b])) for b in kinds},
                               "ci": {b: [math.exp(x) for x in stats.median_ci(logr[-1][b], c.ci_level)[::2]] for b in kinds}})
            if c.respawn_blocks:
                for w in list(parties.values()):
                    if w is not t.w:
                        w.close()
                        started.remove(w)
            if len(done) < n0:
                continue
            cis, decisions = block_decisions(logr, thr, c.ci_level)
            need = decisions.get("eager") == "undecided" or (decisions.get("eager") == "above" and decisions.get("compile") == "undecided")
            if not need:
                break
        names = ["candidate"] + kinds
        cat = {k: {n: [x for pr in done for x in getattr(pr, k)[n]] for n in names} for k in ("wall", "cpu", "outside")}
        timings = {n: timing_summary(cat["wall"][n], cat["cpu"][n], timer) for n in names}
        paired = {b: {"speedup": math.exp(cis[b][1]), "ci": [math.exp(cis[b][0]), math.exp(cis[b][2])],
                      "decision": decisions[b], "threshold": thr} for b in cis}
        paired["rounds"] = sum(pr.rounds - pr.first for pr in done)
        paired["rechecked"] = sum(pr.checked for pr in done)
        paired["timer"] = timer
        paired["blocks"] = block_info
        paired["interval"] = "student_t over block medians" if len(done) > 1 else "order statistics over rounds (one block)"
        if timer == "cpu" and paired["rounds"]:
            oc, oe = cat["outside"]["candidate"], cat["outside"]["eager"]
            out_c, out_e = stats.median(oc), stats.median(oe)
            diff = stats.median([a - b for a, b in zip(oc, oe)])
            paired["outside_cpu_ms_per_round"] = {"candidate": out_c / 1e6, "eager": out_e / 1e6, "paired_diff": diff / 1e6}
            med = stats.median(cat["cpu"]["candidate"])
            if diff > untimed_work_bound(med, out_e):
                t.add(Finding("untimed_work", f"the candidate used {diff / 1e6:.2f} ms more CPU per round than the eager baseline "
                              f"outside its timed calls (median of paired differences; eager {out_e / 1e6:.2f} ms): work moved "
                              "out of the timed window? (review: a backstop that load noise can trip)", "review", "timing"))
        io_bytes = next((pr.io_bytes for pr in done if pr.io_bytes), 0)
        if c.floor_bandwidth_factor > 0 and io_bytes:
            floor_ms = io_bytes / (c.floor_bandwidth_factor * memory_bandwidth(t.device)) * 1e3
            paired["floor_ms"] = floor_ms
            if timings["candidate"]["median_ms"] < floor_ms:
                t.add(Finding("below_physical_floor", f"median {timings['candidate']['median_ms']:.4f} ms is below the memory-bandwidth "
                              f"floor {floor_ms:.4f} ms for {io_bytes} bytes", "error", "timing"))
        inconclusive = any(v == "undecided" for v in decisions.values()) and need
        return timings, paired, inconclusive
    finally:
        for w in started:
            if w is not t.w:
                w.close()


# ----------------------------------------------------------------------------- the whole protocol

def evaluate(problem, solution, config: EvalConfig | None = None) -> Result:
    """Evaluate one solution against one problem. Never raises for anything the candidate does: every
    failure is a Result with findings and a reason. Raises ShiftkitError for user/harness conditions
    (missing files, bad config, backend or sandbox unavailable)."""
    config = config or EvalConfig()
    config.validate()
    t0 = time.perf_counter()
    p, s = _resolve(problem, solution, config)
    res = Result(problem=p.name, solution=str(s.path))
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(config.threads)  # the parent's checks share the cores with the worker
    try:
        _evaluate(p, s, config, res)
    finally:
        torch.set_num_threads(prev)
        res.seconds = time.perf_counter() - t0
    return res


def _finish(res: Result, config: EvalConfig, reason_prefix: str = "") -> Result:
    errs = errors(res.findings)
    res.correct = res.correct and not errs
    if config.reward == "milestone" and res.paired:
        reward, why, res.inconclusive = paired_milestone_reward(
            res.correct, res.paired.get("eager", {}).get("decision"), res.paired.get("compile", {}).get("decision"),
            res.speedup_eager, res.speedup_compile, config.margin)
    else:
        fn = get_reward_fn(config.reward)
        reward, why = fn(res.correct, res.speedup_eager, res.speedup_compile, **({"margin": config.margin} if config.reward == "milestone" else {}))
    res.reward = reward
    if res.correct and not config.profile:
        why = "correct (compile + verify only; not profiled)"
    if not res.correct:
        why = res.reason or (f"{errs[0].code}: {errs[0].message}" if errs else "incorrect")
        res.inconclusive = False
    if res.sandbox.get("isolated") is False and not any(f.code == "untrusted_result" for f in res.findings):
        res.findings.append(Finding("untrusted_result", f"ran without the sandbox: {res.sandbox.get('reason', '')}", "review"))
    res.reason = reason_prefix + why
    return res


def _evaluate(p: Problem, s: Solution, config: EvalConfig, res: Result) -> None:
    avail, why = get_backend(config.backend).available()
    if not avail:
        raise ShiftkitError(f"backend {config.backend!r} is not available here: {why}")
    res.findings = static_findings(s, p.allow_reduced_precision) if config.static_checks else list(s.findings)
    if config.stop_on_static and errors(res.findings):
        e = errors(res.findings)[0]
        res.reason = f"static check {e.code}: {e.message}"
        _finish(res, config)
        return
    builds = _do_build(res, s, config)
    if not res.compiled:
        _finish(res, config)
        return
    res.stage = "admission"
    adm = admit_problem(p, config) if config.check_degenerate else []
    if adm:
        res.findings += adm
        res.reward, res.reason = 0.0, f"problem not admitted: {adm[0].message}"
        return
    res.stage = "load"
    w = None
    try:
        w = start_worker(p, s, builds, config)
        res.sandbox = dict(w.sandbox)
        _load_in_worker(w, p, config)
        t = _Trials(w, p, config, s)
        t.check_tasks("import")
        res.stage = "correctness"
        res.correct = check_correctness(t)
        res.findings += t.findings
        res.max_abs_diff = t.max_diff
        if res.correct and config.profile:
            res.stage = "profile"
            t.findings = []
            res.timings, res.paired, res.inconclusive = paired_profile(t, s, builds)
            res.findings += t.findings
            res.correct = not errors(res.findings)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:  # a reply we cannot interpret
        res.findings.append(Finding("protocol_violation", f"malformed reply from the worker: {type(e).__name__}: {str(e)[:300]}", "error", res.stage))
        res.correct = False
        res.reason = f"protocol_violation during {res.stage}: {type(e).__name__}"
    except WorkerFailure as e:
        if e.violations:
            ops = ", ".join(f"{k} x{n}" for k, n in sorted(e.violations.items()))
            res.findings.append(Finding("blocked_torch_op", f"torch ops ran inside ModelNew.forward: {ops}", "error", res.stage))
        known = ("worker_crash", "timeout", "out_of_memory", "output_limit", "runtime_error", "load_error",
                 "state_dict_mismatch", "protocol_violation", "harness_tampering")
        res.findings.append(Finding(e.code if e.code in known else "runtime_error", e.message[:1000], "error", res.stage))
        res.correct = False
        res.reason = f"{e.code} during {res.stage}: {e.message[:300]}"
        if e.log_tail:
            res.sandbox["log_tail"] = e.log_tail[-1500:]
    finally:
        if w is not None:
            w.close()
    if res.correct and config.profile and res.paired:
        res.speedup_eager = res.paired["eager"]["speedup"]
        if "compile" in res.paired:
            res.speedup_compile = res.paired["compile"]["speedup"]
        best = max(x for x in (res.speedup_eager, res.speedup_compile) if x is not None)
        if best > config.implausible_speedup:
            res.findings.append(Finding("implausible_speedup", f"speedup {best:.1f}x exceeds {config.implausible_speedup:g}x: review", "review"))
    res.stage = "done"
    _finish(res, config)
