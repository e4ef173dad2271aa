"""``evaluate(problem, solution, config) -> Result``: the evaluation protocol, one step per function.

1. :func:`static_findings`  - pure source checks (static.py)
2. :func:`build_solution`   - content-hash-cached builds with structured compile errors (build.py)
3. :class:`sandbox.Worker`  - the candidate runs in a sandboxed worker; checker and timer stay here
4. op blocking              - a TorchDispatchMode inside the worker (blocking.py), violations reported
5. :func:`check_correctness`- seeded trials (secret seed mixed in), both orders, determinism, shape variants
6. :func:`admit_problem`    - degenerate-task guard (cached per problem)
7. :func:`profile`          - warm-up, >=30 parent-timed calls on fresh inputs with LLC flush, re-checked
8. reward.py                - milestone / log-speedup, pure; 9. metrics.py - set metrics
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import correctness as C
from shiftkit.kernels import static, stats, wire
from shiftkit.kernels.backends import get_backend, machine_id
from shiftkit.kernels.build import BuildResult, CompileError, build, default_cache_dir
from shiftkit.kernels.findings import Finding, errors
from shiftkit.kernels.problem import Problem, load_problem
from shiftkit.kernels.reward import get_reward_fn
from shiftkit.kernels.sandbox import Worker, WorkerFailure
from shiftkit.kernels.solution import Solution, load_solution

_SECRET = int(os.environ.get("SHIFTKIT_KERNEL_SECRET_SEED") or secrets.randbits(31))


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
    timed_calls: int = 30
    recheck_timed: bool = True
    baseline_compile: bool = True
    baseline_cache: bool = True
    flush_llc: bool = True
    llc_flush_mb: int = 0  # 0: twice the detected last-level cache
    threads: int = 1
    timeout_s: float = 120.0
    compile_timeout_s: float = 300.0
    build_jobs: int = 2
    mem_limit_mb: int = 4096
    max_output_bytes: int = 1_000_000
    isolate_network: bool = True
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
        if self.trials < 1 or self.timed_calls < 1 or self.threads < 1:
            raise ShiftkitError("trials, timed_calls and threads must be >= 1")

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
        return _SECRET if self.secret_seed is None else int(self.secret_seed)


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
    for spec in solution.specs:
        for rel, text in spec.sources.items():
            out += [dataclasses.replace(f, where=f"{spec.name}/{rel} {f.where}") for f in static.check_cpp(text, allow_reduced_precision)]
        out += static.check_flags(spec.extra_cflags + spec.extra_cuda_cflags, allow_reduced_precision)
    return out


# ----------------------------------------------------------------------------- 2. build

def build_solution(solution: Solution, config: EvalConfig) -> list[BuildResult]:
    """Build every spec (parallel builds are safe: per-key locks)."""
    return [build(s, config.cache, config.compile_timeout_s, config.build_jobs) for s in solution.specs]


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
    return 2 * (best or 32 * 2**20)


def start_worker(problem: Problem, solution: Solution | None, builds: list[BuildResult], config: EvalConfig,
                 mode: str = "candidate") -> Worker:
    entries = []
    if solution is not None:
        for spec, b in zip(solution.specs, builds):
            entries.append({"spec_key": spec.key(), "so_path": b.so_path, "spec": dataclasses.asdict(spec),
                            "workspace_ext": solution.layout == "workspace" and spec.name == "kernel_ext"})
    setup = {
        "mode": mode, "problem_path": str(problem.path), "backend": config.backend,
        "solution_dir": str(solution.path if solution and solution.layout == "workspace" else (solution.path.parent if solution else "")),
        "python_name": solution.python_name if solution else "", "builds": entries,
        "threads": config.threads, "mem_mb": config.mem_limit_mb if mode == "candidate" else 0,
        "cpu_s": int(config.timeout_s * 2) if mode == "candidate" else 0,
        "max_output_bytes": config.max_output_bytes if mode == "candidate" else 0,
        "sandbox": True, "isolate_network": config.isolate_network and mode == "candidate",
        "block_ops": config.block_ops, "flush_bytes": _flush_bytes(config),
        "device": get_backend(config.backend).device,
    }
    return Worker(setup, config.timeout_s if mode == "candidate" else max(config.timeout_s, 600.0))


def _load_in_worker(w: Worker, problem: Problem, config: EvalConfig) -> None:
    sd = problem.make_model(config.seed).state_dict()
    header, _ = w.request({"cmd": "load"}, wire.dumps_tensors(dict(sd)))
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

    def __init__(self, w: Worker, problem: Problem, config: EvalConfig, base_threads: int):
        self.w, self.p, self.c = w, problem, config
        self.device = get_backend(config.backend).device
        self.model = problem.make_model(config.seed).to(self.device)
        self.base_threads = base_threads
        self.findings: list[Finding] = []
        self.max_diff = 0.0
        self.seen_ops: set[str] = set()

    def add(self, f: Finding) -> None:
        if not any(x.code == f.code for x in self.findings):
            self.findings.append(f)

    def expected(self, inputs):
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
        allowance = 2 * (self.c.threads - 1)
        n = self.w.threads()
        if n > self.base_threads + allowance:
            self.add(Finding("thread_spawned", f"worker has {n} threads (baseline {self.base_threads}, allowed +{allowance})", "error", where))

    def run_trial(self, inputs, ref_first: bool, where: str):
        h, blob = self.w.request({"cmd": "trial", "ref_first": ref_first}, wire.dumps_tensors(inputs))
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
    input-sensitivity, a determinism re-run and shape variants. Stops at the first error."""
    c, p = t.c, t.p
    outs, exps, first_inputs = [], [], None
    for k in range(c.trials):
        inputs = p.inputs(C.mix_seed(c.seed + k, c.secret))
        exp = t.expected(inputs)
        out = t.run_trial(inputs, ref_first=(k % 2 == 0), where=f"trial {k}")
        if out is None or errors(t.findings) or not t.judge(exp, out, f"trial {k}"):
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
            exp = t.expected(inputs)
            out = t.run_trial(inputs, ref_first=bool(i % 2), where=f"shape variant {var}")
            if out is None or errors(t.findings) or not t.judge(exp, out, f"shape variant {var}", "shape_variant_mismatch"):
                return False
    return True


# ----------------------------------------------------------------------------- 7. profiling

def time_calls(w: Worker, problem: Problem, config: EvalConfig, seed_base: int, secret: int | None) -> tuple[list[int], list[int]]:
    """Warm-up, then ``timed_calls`` parent-timed calls, each on fresh inputs with an LLC flush before it."""
    mk = (lambda i: C.mix_seed(seed_base + i, secret)) if secret is not None else (lambda i: seed_base + i)
    h, _ = w.request({"cmd": "warmup", "n": config.warmup}, wire.dumps_tensors(problem.inputs(mk(0))))
    if not h.get("ok"):
        raise WorkerFailure(h.get("kind", "runtime_error"), h.get("error", "warm-up failed"), violations=h.get("violations"))
    wall, cpu = [], []
    for i in range(config.timed_calls):
        h, _ = w.request({"cmd": "prep"}, wire.dumps_tensors(problem.inputs(mk(i))))
        if not h.get("ok"):
            raise WorkerFailure(h.get("kind", "runtime_error"), h.get("error", "prep failed"))
        t, c = w.timed_call()
        wall.append(t)
        cpu.append(c)
    return wall, cpu


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


def _baseline_path(problem: Problem, config: EvalConfig, kind: str) -> Path:
    import hashlib

    import torch

    mid = hashlib.sha256(machine_id().encode()).hexdigest()[:10]
    tag = f"{problem.hash}-{kind}-t{config.threads}-n{config.timed_calls}-w{config.warmup}-f{int(config.flush_llc)}-s{config.seed}-v2"
    return config.cache / "baselines" / f"{mid}-torch{torch.__version__}" / f"{tag}.json"


def baseline_timing(problem: Problem, config: EvalConfig, kind: str) -> dict:
    """Eager (``reference``) or ``compile`` timing of the reference, through the same worker protocol,
    cached per (machine, torch version, problem, timing settings)."""
    path = _baseline_path(problem, config, kind)
    if config.baseline_cache and path.is_file():
        d = json.loads(path.read_text())
        timer = config.effective_timer if f"{config.effective_timer}_median_ms" in d else "wall"
        return d | {"timer": timer, "median_ms": d[f"{timer}_median_ms"], "iqr_ms": d[f"{timer}_iqr_ms"], "cached": True}
    w = start_worker(problem, None, [], config, mode="reference" if kind == "eager" else "compile")
    try:
        _load_in_worker(w, problem, config)
        wall, cpu = time_calls(w, problem, config, config.seed + 1000, None)
    finally:
        w.close()
    d = timing_summary(wall, cpu, config.effective_timer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(d))
    os.replace(tmp, path)
    return d | {"cached": False}


def profile(t: _Trials) -> dict:
    c = t.c
    wall, cpu = time_calls(t.w, t.p, c, c.seed + 1000, c.secret)
    h, blob = t.w.request({"cmd": "collect"})
    if not h.get("ok"):
        raise WorkerFailure(h.get("kind", "runtime_error"), h.get("error", "collect failed"))
    t.check_header(h, "timing")
    if c.recheck_timed:
        try:
            outs = wire.loads_tensors_untrusted(blob)
        except Exception as e:  # noqa: BLE001
            t.add(Finding("output_type", f"timed output is not plain tensors: {str(e)[:200]}", "error", "timing"))
            outs = []
        for i, out in enumerate(outs):
            exp = t.expected(t.p.inputs(C.mix_seed(c.seed + 1000 + i, c.secret)))
            if not t.judge(exp, out, f"timed call {i}", "timed_output_mismatch"):
                break
    return timing_summary(wall, cpu, c.effective_timer)


# ----------------------------------------------------------------------------- the whole protocol

def evaluate(problem, solution, config: EvalConfig | None = None) -> Result:
    """Evaluate one solution against one problem. Never raises for candidate failures: every failure is
    a Result with findings and a reason."""
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
    fn = get_reward_fn(config.reward)
    reward, why = fn(res.correct, res.speedup_eager, res.speedup_compile, **({"margin": config.margin} if config.reward == "milestone" else {}))
    res.reward = reward
    if res.correct and not config.profile:
        why = "correct (compile + verify only; not profiled)"
    if not res.correct:
        why = res.reason or (f"{errs[0].code}: {errs[0].message}" if errs else "incorrect")
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
        base_threads = w.threads()
        _load_in_worker(w, p, config)
        t = _Trials(w, p, config, base_threads)
        t.check_header({}, "import")
        res.stage = "correctness"
        res.correct = check_correctness(t)
        res.findings += t.findings
        res.max_abs_diff = t.max_diff
        if res.correct and config.profile:
            res.stage = "profile"
            t.findings = []
            res.timings["candidate"] = profile(t)
            res.findings += t.findings
            res.correct = not errors(res.findings)
    except WorkerFailure as e:
        if e.violations:
            ops = ", ".join(f"{k} x{n}" for k, n in sorted(e.violations.items()))
            res.findings.append(Finding("blocked_torch_op", f"torch ops ran inside ModelNew.forward: {ops}", "error", res.stage))
        res.findings.append(Finding(e.code if e.code in ("worker_crash", "timeout", "out_of_memory", "output_limit", "runtime_error", "load_error", "state_dict_mismatch") else "runtime_error",
                                    e.message[:1000], "error", res.stage))
        res.correct = False
        res.reason = f"{e.code} during {res.stage}: {e.message[:300]}"
        if e.log_tail:
            res.sandbox["log_tail"] = e.log_tail[-1500:]
    finally:
        if w is not None:
            w.close()
    if res.correct and config.profile:
        res.timings["eager"] = baseline_timing(p, config, "eager")
        cand = res.timings["candidate"]["median_ms"]
        res.speedup_eager = stats.speedup(res.timings["eager"]["median_ms"], cand)
        if config.baseline_compile:
            res.timings["compile"] = baseline_timing(p, config, "compile")
            res.speedup_compile = stats.speedup(res.timings["compile"]["median_ms"], cand)
        best = max(x for x in (res.speedup_eager, res.speedup_compile) if x is not None)
        if best > config.implausible_speedup:
            res.findings.append(Finding("implausible_speedup", f"speedup {best:.1f}x exceeds {config.implausible_speedup:g}x: review", "review"))
    res.stage = "done"
    _finish(res, config)
