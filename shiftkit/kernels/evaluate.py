"""``evaluate(problem, solution, EvalConfig) -> Result``: the evaluation protocol, one step per method.

The parent owns the clock, the data and the verdict (docs/kernels.md, "Threat model"):

1. the solution was parsed in a limited subprocess (:mod:`analysis`, at :func:`solution.load_solution`);
2. :meth:`_Evaluation.build`  - sandboxed builds; every artefact's imports pass the allowlist (:mod:`symbols`);
3. :func:`admit_problem`        - degenerate-task guard (parent only, cached per problem);
4. :meth:`_Evaluation.correctness` - rounds on the problem's inputs and on transformed inputs, shape variants
   and a repeat; every output read by the parent from its own memory and compared with its own reference;
5. :meth:`_Evaluation.profile`  - candidate, eager and torch.compile timed in paired rounds, in blocks of
   fresh workers; every timed output compared too;
6. :meth:`_Evaluation.attribute` - where the candidate's on-CPU time went (the parent's perf samples);
7. reward.py                    - paired milestones with confidence intervals, or log-speedup.

One wall-clock budget covers the evaluation (``compile_timeout_s`` for the build, then ``timeout_s``);
one exception boundary turns anything unexpected into a ``harness_error`` finding.
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
from shiftkit.kernels import sandbox, shm, stats, wire
from shiftkit.kernels.backends import get_backend
from shiftkit.kernels.build import BuildResult, CompileError, build, default_cache_dir
from shiftkit.kernels.findings import Finding, errors
from shiftkit.kernels.perf import AttributionLimit
from shiftkit.kernels.problem import KernelProblem, load_problem
from shiftkit.kernels.reward import REWARDS, get_reward_fn, paired_milestone_reward, threshold
from shiftkit.kernels.sandbox import IsolationUnavailable, Worker, WorkerFailure
from shiftkit.kernels.solution import Solution, load_solution

SECRET_ENV = "SHIFTKIT_KERNEL_SECRET_SEED"
TEARDOWN_SLACK_S = 15.0  # the fixed slack on top of the budget: killing and reaping trees, removing cgroups


@dataclass
class EvalConfig:
    backend: str = "cpu"
    profile: bool = True  # False: compile + verify only (cheap mode for agent tools)
    trials: int = 5  # correctness rounds on the problem's own input distribution
    transforms: bool = True  # plus rounds on sign-flipped, scaled and half-zeroed inputs (where well defined)
    seed: int = 42  # weights and the public half of every input seed
    secret_seed: int | None = None  # None: a fresh secret per evaluation (set it only to reproduce inputs)
    tolerance: str = "default"  # default | cuda_agent (1e-2) | strict; atol is a fraction of the output's rms
    atol: float | None = None
    rtol: float | None = None
    determinism: bool = True  # repeat the first round's inputs and compare
    shape_variants: bool = True
    block_ops: bool = True  # name torch ops in ModelNew.forward during correctness rounds (advisory, in the worker)
    check_degenerate: bool = True
    foreign_share_max: float = 0.25  # most of the candidate's sampled on-CPU time that may be torch or other libraries
    sample_period_us: int = 50  # the parent's sampling period (on-CPU time)
    warmup: int = 3
    timed_calls: int = 30  # paired rounds before the first decision, split evenly over the first blocks
    max_timed_calls: int = 40  # budget of paired rounds: blocks are added while an interval straddles a threshold
    timing_blocks: int = 3  # independent timing blocks (fresh candidate and baseline workers each)
    min_block_rounds: int = 10
    respawn_blocks: bool = True  # False: every block reuses the first block's workers (diagnostic only)
    pin_cpu: bool = True  # confine all workers of a block to the same CPU(s) (cpuset)
    ci_level: float = 0.95
    baseline_compile: bool = True
    floor_bandwidth_factor: float = 4.0  # review flag below bytes moved / (factor x measured copy bandwidth); 0 = off
    flush_llc: bool = True
    llc_flush_mb: int = 0  # 0: twice the detected last-level cache (capped at 64 MB)
    threads: int = 1
    timeout_s: float = 300.0  # wall-clock budget of the evaluation after the build (torch.compile workers need ~1 min)
    compile_timeout_s: float = 300.0  # wall-clock budget of the build
    build_jobs: int = 2
    mem_limit_mb: int = 4096
    max_output_bytes: int = 1_000_000  # the worker's log (stdout/stderr)
    pids_max: int = 64  # tasks (threads + processes) in a worker's tree
    allow_unisolated: bool = False  # run even where the sandbox is unavailable; the result is marked untrusted
    implausible_speedup: float = 10.0
    timer: str = "auto"  # wall | cpu | auto (cpu for the cpu backend with 1 thread, else wall)
    reward: str = "milestone"  # milestone | log_speedup
    margin: float = 0.05
    cache_dir: str = ""  # "": $SHIFTKIT_KERNEL_CACHE or .cache/kernels

    def validate(self) -> None:
        get_backend(self.backend)
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
        if self.sample_period_us < 10:
            raise ShiftkitError("sample_period_us must be >= 10")
        if not 0 < self.foreign_share_max <= 1:
            raise ShiftkitError("foreign_share_max must be in (0, 1]")
        if self.timeout_s <= 0 or self.compile_timeout_s <= 0:
            raise ShiftkitError("timeout_s and compile_timeout_s must be > 0")
        if os.environ.get(SECRET_ENV):
            raise ShiftkitError(f"${SECRET_ENV} is set but no longer read: every evaluation draws a fresh secret; "
                                "set secret_seed=N in the config to reproduce inputs (unset the variable)")

    @property
    def cache(self) -> Path:
        return Path(self.cache_dir).resolve() if self.cache_dir else default_cache_dir()

    @property
    def effective_timer(self) -> str:
        if self.timer != "auto":
            return self.timer
        return "cpu" if self.backend == "cpu" and self.threads == 1 else "wall"


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
    rounds: list[dict] = field(default_factory=list)  # the correctness rounds: what each was, and its verdict
    # how floating outputs were compared: "per-element" (each element's budget from its own sensitivity,
    # correctness.element_scales) or "per-tensor: <why>" (atol x the output's rms, where no float64 reference runs)
    tolerance: str = ""

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["findings"] = [f.to_dict() for f in self.findings]
        d["compile_errors"] = [e.to_dict() for e in self.compile_errors]
        return d

    def codes(self, severity: str | None = "error") -> list[str]:
        return [f.code for f in self.findings if severity is None or f.severity == severity]


def _resolve(problem, solution, config: EvalConfig) -> tuple[KernelProblem, Solution]:
    p = problem if isinstance(problem, KernelProblem) else load_problem(problem)
    s = solution if isinstance(solution, Solution) else load_solution(solution, config.backend)
    return p, s


def isolation_problem() -> str:
    """'' where candidate code can be sandboxed here, else why not."""
    return sandbox.isolation_problem()


def _unisolated(config: EvalConfig) -> bool:
    """Run without the sandbox? Only with allow_unisolated where it is unavailable; else fail closed. The
    facilities every evaluation needs (cgroups, perf sampling, process_vm_readv) are never waived."""
    need = sandbox.facility_problem()
    if need:
        raise ShiftkitError(f"cannot evaluate kernels here: {need}")
    why = isolation_problem()
    if not why:
        return False
    if not config.allow_unisolated:
        raise ShiftkitError(f"the evaluation sandbox is unavailable here ({why}); refusing to run candidate code "
                            "(set allow_unisolated=true to run anyway; the result is then marked untrusted)")
    return True


# ----------------------------------------------------------------------------- problem admission

_ADMISSION: dict[tuple, list[Finding]] = {}


PROBLEM_FAULTS = ("degenerate_problem", "reference_error")  # the problem's fault, not the solution's: reward 0


def admit_problem(problem: KernelProblem, config: EvalConfig) -> list[Finding]:
    """Degenerate-task guard: the reference output must not be all-zero or constant and must change with the
    inputs. Cached per (problem, tolerance)."""
    import torch

    key = (problem.hash, config.tolerance, config.atol, config.rtol, config.seed)
    if key in _ADMISSION:
        return _ADMISSION[key]
    outs = []
    try:
        model = problem.make_model(config.seed)
        with torch.no_grad():
            for k in range(2):  # with the inputs it writes (with_writes): an in-place reference returning None is not degenerate
                xs = problem.inputs(config.seed + 7919 * k)
                v0 = C.versions(shm.tensor_leaves(xs))
                out = model(*xs)
                outs.append(C.owned_copy(with_writes(out, xs, output_writes(v0, xs, out))))
    except Exception as e:  # noqa: BLE001 - the problem is broken, not the solution (redteam12 p02: self.type shadowed)
        found = [Finding("reference_error", f"the problem's reference raised on its own inputs: {type(e).__name__}: "
                         f"{str(e)[:300]}", "error", "admission")]
        _ADMISSION[key] = found
        return found
    atol, rtol = C.tolerance_for(_first_dtype(outs[0]), config.tolerance, config.atol, config.rtol)
    found = []
    d = C.degeneracy(outs[0], atol, rtol)
    if d:
        found.append(Finding("degenerate_problem", f"reference output is {d.replace('_', '-')} within atol={atol:g}, rtol={rtol:g}"))
    elif C.has_float(outs[0]) and C.same_outputs(outs[0], outs[1], atol, rtol):
        found.append(Finding("degenerate_problem", "reference output does not change with the inputs"))
    _ADMISSION[key] = found
    return found


def with_writes(out: Any, xs: Any, written: list[int]) -> Any:
    """Pure: a reference's output with the input tensors it writes after it, ``(out, [those inputs])``, where
    ``written`` (indices in :func:`shm.tensor_leaves` order) is not empty; else ``out``. What a reference writes
    into its inputs is its output too (redteam10 h09: an accumulator reset by ``acc.zero_()`` and never compared;
    h05: a reference returning None): every party returns it, and the candidate's is compared. ``written`` is
    :func:`output_writes` of trial 0."""
    if not written:
        return out
    leaves = shm.tensor_leaves(xs)
    return out, [leaves[i] for i in written]


def written_inputs(before: list[int], xs: Any) -> list[int]:
    """The indices (:func:`shm.tensor_leaves` order) of the tensors of ``xs`` whose version counter moved from
    ``before`` (:func:`C.versions` in that order): the inputs a call wrote, whatever the values."""
    return [i for i, (a, b) in enumerate(zip(before, C.versions(shm.tensor_leaves(xs)))) if a != b]


def output_writes(before: list[int], xs: Any, out: Any = None) -> list[int]:
    """The inputs a call wrote (:func:`written_inputs`), less those its output ``out`` returns whole
    (:func:`returns_whole`): every other write is an output (:func:`with_writes`), compared on every round.
    Whatever the values written: a guard ``clamp_`` that changes nothing on the problem's own inputs changes them
    on the scaled-up and outlier rounds (redteam11 h01, h04 skipped the write-back of such a clip), so its
    write-back is part of the reference's behaviour. A written input the reference returns whole
    (``x.mul_(w).add_(b); return x``) is compared as that output: a kernel computing it out of place passes
    (redteam9 hn01); one it returns only part of (``qkv.mul_(w); return qkv.narrow(0, 0, n)``) is compared whole
    too (redteam11 h02 updated only the returned third)."""
    now = shm.tensor_leaves(xs)
    returned = C._tensors(out)
    return [i for i in written_inputs(before, xs) if not any(returns_whole(t, now[i]) for t in returned)]


def returns_whole(t: Any, x: Any) -> bool:
    """Pure: does ``t`` hold every element of ``x`` and nothing else (the same dense span of the same storage: ``x``
    itself, ``x.view(-1)``, ``x.t()``)? A partial view (``x[1:]``, a narrow) does not; neither does a
    non-dense ``x`` (its span has holes), which is then compared as written."""
    def extent(v) -> int:
        return 1 + sum((n - 1) * abs(st) for n, st in zip(v.shape, v.stride())) if v.numel() else 0

    return (t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and t.dtype == x.dtype
            and t.storage_offset() == x.storage_offset() and t.numel() == x.numel()
            and extent(t) == t.numel() and extent(x) == x.numel())


def _first_dtype(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    if isinstance(x, (list, tuple)) and x:
        return _first_dtype(x[0])
    if isinstance(x, dict) and x:
        return _first_dtype(next(iter(x.values())))
    return "float32"


# ----------------------------------------------------------------------------- helpers

FLUSH_CAP = 64 * 2**20  # a VM may report the whole host L3 (480 MB here); its share is far smaller


def _flush_bytes(config: EvalConfig) -> int:
    if not config.flush_llc:
        return 0
    if config.llc_flush_mb:
        return config.llc_flush_mb * 2**20
    best = 0
    for idx in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            txt = (idx / "size").read_text().strip()
            n = int(txt[:-1]) * (1024 if txt.endswith("K") else 2**20 if txt.endswith("M") else 1) if txt[-1] in "KM" else int(txt)
            best = max(best, n)
        except (OSError, ValueError):
            continue
    return min(2 * (best or 32 * 2**20), FLUSH_CAP)


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


def timing_summary(wall: list[int], cpu: list[int], timer: str) -> dict:
    """Wall and on-CPU statistics; ``median_ms``/``iqr_ms`` follow the chosen timer."""
    w = stats.summarize(wall)
    d = {"wall_median_ms": w["median_ms"], "wall_iqr_ms": w["iqr_ms"], "times_ms": [x / 1e6 for x in wall], "n": w["n"]}
    c = stats.summarize(cpu)
    d |= {"cpu_median_ms": c["median_ms"], "cpu_iqr_ms": c["iqr_ms"], "cpu_times_ms": [x / 1e6 for x in cpu]}
    src = "cpu" if timer == "cpu" else "wall"
    return d | {"timer": src, "median_ms": d[f"{src}_median_ms"], "iqr_ms": d[f"{src}_iqr_ms"]}


def block_plan(timed_calls: int, timing_blocks: int, max_timed_calls: int, min_rounds: int = 10) -> tuple[int, int, int]:
    """Pure: (blocks before the first decision, rounds per block, most blocks within the round budget)."""
    n0 = max(1, min(timing_blocks, timed_calls // max(1, min_rounds)))
    per = -(-timed_calls // n0)
    return n0, per, n0 if n0 == 1 else max(n0, max_timed_calls // per)


def more_blocks_needed(decisions: dict[str, str]) -> bool:
    """Pure: a milestone still hangs on an interval that straddles its threshold: eager's, or compile's once
    eager's is cleared (the one rule for adding a block and for calling a stopped evaluation inconclusive)."""
    eager = decisions.get("eager")
    return eager == "undecided" or (eager == "above" and decisions.get("compile") == "undecided")


MIN_BLOCKS_JUDGED = 2  # the budget never stops timing before two blocks: the mean-cost interval needs two
BLOCK_MARGIN = 1.25  # an added block is estimated at this times the slowest finished block
ATTRIBUTION_RESERVE_S = 20.0  # kept for what follows the rounds (closing workers, attribution of samples)


def budget_allows(now: float, deadline: float, block_s: list[float]) -> bool:
    """Pure: another timing block fits before ``deadline`` (monotonic seconds): ``BLOCK_MARGIN`` times the
    slowest finished block (``block_s``, seconds each) plus ``ATTRIBUTION_RESERVE_S``. An added block only
    narrows an interval that straddles a threshold: where it cannot fit, the evaluation ends ``inconclusive``
    with the milestone already decided, not with a timeout that would reject an honest kernel for the harness's
    own cost (redteam10 hn09: a 4M-element problem whose fourth block ran past the 300 s budget). The check
    starts after :data:`MIN_BLOCKS_JUDGED` blocks, also before the plan's first decision: fewer blocks give a
    wider interval, so stopping early can only make a milestone harder to grant."""
    need = BLOCK_MARGIN * max(block_s, default=0.0) + ATTRIBUTION_RESERVE_S
    return now + need <= deadline


def spot_plan(per: int, block: int, kinds: int, seed: int) -> dict[int, int]:
    """Pure: which rounds of a timing block get transformed inputs (position -> index into the admitted
    transforms). A block holds ``per`` natural rounds plus ``m = min(kinds, max(1, per // 2))`` spot rounds
    (none without admitted transforms); positions, among the block's ``per + m`` rounds, come from a secret
    seed; block ``b`` takes the next ``m`` admitted transforms, cyclically (so a block of 10 natural rounds
    covers 5 of them and two blocks cover up to 10), so a kernel that is right only on the problem's own
    distribution, or only while it believes it is being checked, fails a timed round. Spot rounds are run and
    compared like every timed round, but are out of the clock (:func:`clock_times`)."""
    import random

    if kinds <= 0 or per <= 0:
        return {}
    m = min(kinds, max(1, per // 2))
    pos = random.Random(seed).sample(range(per + m), m)
    return {q: (block * m + t) % kinds for t, q in enumerate(sorted(pos))}


def clock_times(times: dict[str, list[int]], spots) -> dict[str, list[int]]:
    """Pure: each party's times of a block's natural rounds only (positions in ``spots`` dropped). Spot
    rounds - the harness's transformed inputs - are compared like every round but never timed, for any
    party: speed is measured on the problem's own input distribution, so a fast path taken only on the
    harness's transformed inputs (a small range, a coarse grid, zeroed halves) buys nothing (redteam4 h08)."""
    return {n: [t for j, t in enumerate(ts) if j not in spots] for n, ts in times.items()}


def block_decisions(blocks: list[dict[str, list[tuple[float, float]]]], thr: float, level: float) -> tuple[dict, dict]:
    """Pure: per baseline, the interval of the paired speedup (log space) and its decision. ``blocks``: per
    block, per baseline, the paired (baseline, candidate) times of its rounds. Several blocks: the Student-t
    interval over the blocks' mean-cost log ratios (:func:`stats.block_values`); one block: the
    order-statistic interval of its per-round log ratios (a median: the mean-cost guarantee needs two blocks,
    which the default plan always has)."""
    cis, decisions = {}, {}
    for b in blocks[0] if blocks else {}:
        if len(blocks) == 1:
            cis[b] = stats.median_ci(stats.log_ratios(*zip(*blocks[0][b])), level)
        else:
            cis[b] = stats.blocks_ci(stats.block_values([blk[b] for blk in blocks]), level)
        decisions[b] = stats.decide(cis[b], thr)
    return cis, decisions


def _lower_bound(k: int, n: int, z: float) -> float:
    """Pure: the Wilson score lower bound of a proportion k/n at ``z`` standard errors (one-sided)."""
    if n <= 0:
        return 0.0
    p, z2 = k / n, z * z
    return max(0.0, (p + z2 / (2 * n) - z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n))


def round_windows(rounds: list[dict[str, int]], min_samples: int) -> list[tuple[int, int, dict[str, int]]]:
    """Pure: consecutive rounds grouped into observation windows of at least ``min_samples`` samples each (a
    round with that many is a window of its own; smaller ones join their successors; a short tail joins the
    last window). Returns (first round, last round, summed counts) per window, in order."""
    out: list[tuple[int, int, dict[str, int]]] = []
    acc: dict[str, int] = {}
    start = 0
    for i, r in enumerate(rounds):
        for k, v in r.items():
            acc[k] = acc.get(k, 0) + v
        if sum(acc.values()) >= min_samples:
            out.append((start, i, acc))
            acc, start = {}, i + 1
    if acc and sum(acc.values()):
        if out:
            a, _, prev = out[-1]
            out[-1] = (a, len(rounds) - 1, {k: prev.get(k, 0) + acc.get(k, 0) for k in set(prev) | set(acc)})
        else:
            out.append((start, len(rounds) - 1, acc))
    return out


def _share_message(counts: dict[str, int], share: float, share_max: float, where: str, x: int = 0) -> tuple[str, str]:
    t, f = counts.get("torch", 0), counts.get("foreign", 0)
    code = "torch_compute" if t >= max(f, x) else "foreign_compute" if f >= x else "interpreter_compute"
    extra = f", the interpreter's code beyond {INTERP_ALLOWANCE:g}x the eager party's per round ({x})" if x else ""
    return code, (f"{100 * share:.0f}% of the candidate's sampled on-CPU time{where} was in torch ({t}) or other "
                  f"libraries/unmapped code ({f}){extra} rather than its own kernels ({counts.get('candidate', 0)}), "
                  f"the runtime ({counts.get('runtime', 0) - x}) or the OS ({counts.get('kernel', 0)}); at most "
                  f"{100 * share_max:.0f}% is allowed")


SCALED_TIMED = 4  # one natural timed round in this many (drawn from the secret) gets per-element budgets (_scales)
INTERP_ALLOWANCE = 2.0  # the candidate's interpreter code per round counts as runtime up to this multiple of eager's


def judged_excess(interp: list[int | None], allow_per_round: float | None) -> int:
    """Pure: the candidate's interpreter samples over its judged rounds (``interp``, one count per round; None: a
    round not judged, whose samples count as runtime and earn no allowance) beyond ``allow_per_round`` per judged
    round, which count as foreign compute; 0 when no allowance was measured (None)."""
    if allow_per_round is None:
        return 0
    judged = [i for i in interp if i is not None]
    return max(0, int(sum(judged) - allow_per_round * len(judged)))


def foreign_verdict(counts: dict[str, int], share_max: float, min_samples: int = 20,
                    rounds: list[dict[str, int]] | None = None, window_samples: int = 60,
                    z: float = 3.5, interp: list[int | None] | None = None,
                    interp_allow: float | None = None) -> tuple[str, str] | None:
    """Pure: from the candidate's sample counts per category, (finding code, message) when torch or other
    libraries account for more than ``share_max`` of its sampled on-CPU time, else None.

    Judged twice, and the share is never only pooled: over all samples (``counts``), and in every observation
    window of ``rounds`` (each round's counts in order, grouped into windows of at least ``window_samples``;
    a big round is its own window). A window is over the share when even the Wilson lower bound of its
    torch+foreign share (``z`` standard errors, for sampling noise over many windows) exceeds ``share_max``;
    the worst window is reported. So torch confined to some rounds is not diluted by the others.

    ``interp`` (parallel to ``rounds``): each round's runtime samples in the interpreter's own code; beyond
    ``interp_allow`` samples per round (pooled, and per window) they count as foreign: the interpreter's
    builtins compute like any library, and the eager party's interpreter time says what plumbing costs. None
    for a round the eager party's time says nothing of (run under the worker's op blocker, a Python dispatch
    mode: the harness's own interpreter time): its interpreter samples stay runtime and it earns no allowance."""
    rounds = rounds or []
    if interp is not None and len(interp) != len(rounds):
        raise ValueError("interp must hold one count per round")
    interp = interp if interp is not None else [0] * len(rounds)
    total = sum(counts.values())
    t, f = counts.get("torch", 0), counts.get("foreign", 0)
    x = judged_excess(interp, interp_allow)
    if total >= min_samples and (t + f + x) / total > share_max:
        return _share_message(counts, (t + f + x) / total, share_max, "", x)
    worst = None
    for a, b, w in round_windows(rounds, window_samples):
        n = sum(w.values())
        if n < window_samples:
            continue
        xw = judged_excess(interp[a:b + 1], interp_allow)
        k = w.get("torch", 0) + w.get("foreign", 0) + xw
        lb = _lower_bound(k, n, z)
        if lb > share_max and (worst is None or lb > worst[0]):
            worst = (lb, a, b, w, xw)
    if worst is None:
        return None
    lb, a, b, w, xw = worst
    n = sum(w.values())
    where = f" in round{'s' if b > a else ''} {a + 1}{f'-{b + 1}' if b > a else ''} of {len(rounds)}"
    return _share_message(w, (w.get("torch", 0) + w.get("foreign", 0) + xw) / n, share_max, where, xw)


def coverage_verdict(samples: int, cpu_ns: int, period_us: int, min_expected: float = 40.0) -> str | None:
    """Pure: a ``sampling_evaded`` message when the parent's samples cover less than 30 % of what the worker
    tree's CPU time (the cgroup's counter) implies at the sampling period, else None."""
    expect = cpu_ns / (period_us * 1000)
    if expect < min_expected or samples >= 0.3 * expect:
        return None
    return (f"the parent's sampling saw {samples} samples where the worker tree's {cpu_ns / 1e6:.1f} ms of CPU time "
            f"should give ~{expect:.0f}")


def _pin_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


# ----------------------------------------------------------------------------- the evaluation

_WHERE_CODE = {"output_type": "output_type", "output_layout": "output_layout", "blocked_torch_op": "blocked_torch_op",
               "out_of_memory": "out_of_memory", "output_limit": "output_limit"}


class _Evaluation:
    def __init__(self, p: KernelProblem, s: Solution, config: EvalConfig, res: Result):
        self.p, self.s, self.c, self.res = p, s, config, res
        self.t0 = time.monotonic()
        self.deadline = self.t0 + config.compile_timeout_s + config.timeout_s
        self.secret = config.secret_seed if config.secret_seed is not None else secrets.randbits(64)
        self.isolate = not _unisolated(config)
        self.device = get_backend(config.backend).device
        self.workers: list[Worker] = []
        self.builds: list[BuildResult] = []
        self.counts = dict.fromkeys(("candidate", "torch", "runtime", "kernel", "foreign"), 0)
        self.rounds: list[dict[str, int]] = []  # the candidate's per-round sample counts, in order
        self.interp: list[int | None] = []  # the candidate's per-round interpreter samples (None: under the op blocker)
        self.eager_interp = [0, 0]  # the eager party's interpreter samples, rounds
        self.tampered: dict[str, int] = {}  # executable mappings of the candidate's file that fail the segment check
        self.cand_cpu_ns = 0
        self.lost = 0  # samples the kernel took but could not store (a full buffer): they still cover CPU time
        self.foreign_files: dict[str, int] = {}
        self._model = None
        self.m64 = None  # the reference in float64 (None: it has no float64 path)
        # the transforms admitted by plan(), for spot rounds: (name, factor), ("perturb", None), ("redraw", (tensor, variant))
        self.spot_kinds: list[tuple[str, Any]] = []
        self.leaf_dtype = "float64"
        self.ref_alias: list[bool] = []  # per output leaf: is the reference's output a view of its inputs (plan)
        self._n_scales = 0  # element-scale computations so far: each draws its moves from its own seed
        self._last64 = None  # (inputs object, its float64 reference output): the last _reference64 call's
        self.inputs_writable = False  # the reference writes into its inputs (plan): every party gets writable copies
        self.writes_inputs = False  # a reference call bumped a version counter of its inputs (reference)
        self.inf_by_design = False  # the reference's output on trial 0 holds infinities (plan; _well_defined)
        self.leaf_slack: dict[str, float] = {}  # a Python-float leaf's absolute slack by path (plan: C.leaf_noise)
        self.unread_state: list[str] = []  # state-dict keys no op of the reference's forward reads (plan)
        self.written: list[int] = []  # the input tensors (shm.tensor_leaves order) whose values the reference changes on trial 0

    @property
    def model(self):
        """The reference, built here with weights drawn from the secret (never the public seed alone): a
        candidate that predicts the weights instead of using the loaded ones is wrong."""
        if self._model is None:
            self._model = self._perturbed(self.p.make_model(self.seed("weights", 0)).to(self.device))
        return self._model

    def _perturbed(self, model):
        """Every floating parameter (:func:`C.perturb_params`), then every floating persistent buffer
        (:func:`C.perturb_buffers`: BatchNorm's running statistics), moved by noise from the secret, so values
        that are constant at init (LayerNorm's 1 and 0, a running mean 0 and variance 1) take values no
        candidate can assume. A move is kept only where the reference stays defined: on the first trial's
        inputs it does not raise and its output is finite wherever the unperturbed one is. Where a group's move
        is refused, its tensors are admitted by halves (group testing, in name order: k refused tensors of n cost
        O(k log n) reference calls), by the group's rule, then the refused ones by the sign-preserving one
        (:func:`C.perturb_buffers`: a gain under a square root stays positive), then by the group's move shrunk
        by 2, 4, ..., 64 (:data:`C.PARAM_SHRINK`: a parameter defined on both sides of its init, ``sqrt(1 - a^2)``
        at a = 0.9, still moves by a few percent, far past any tolerance; redteam7 h04), so one parameter the model
        cannot move keeps no other at its init (redteam6 h02); a tensor refused every way keeps its seeded init.
        Every accepted state is one the reference was run on. Integer buffers are redrawn (below). Non-persistent
        buffers never reach the candidate (not in the state dict) and are never moved."""
        import torch

        sd = set(model.state_dict().keys())
        groups = [(dict(model.named_parameters()), C.perturb_params, 1),
                  ({k: v for k, v in model.named_buffers() if k in sd}, C.perturb_buffers, 2)]
        x, before = None, None

        def baseline() -> bool:
            """The first trial's inputs and the unperturbed output, once; False where the reference fails there."""
            nonlocal x, before
            if x is None:
                x = _to(self.p.inputs(self.seed("trial", 0)), self.device)
                try:
                    with torch.no_grad():
                        before = _cpu(C.owned_copy(model(*C.owned_copy(x))))
                except Exception:  # noqa: BLE001 - the reference fails unperturbed: nothing to keep defined
                    return False
            return True

        def defined() -> bool:
            try:
                with torch.no_grad():
                    return C.finite_where(_cpu(model(*C.owned_copy(x))), before)
            except Exception:  # noqa: BLE001 - values the model cannot take
                return False

        for tensors, move, purpose in groups:
            tensors = {k: v for k, v in tensors.items() if v.is_floating_point() or v.is_complex()}
            if not tensors:
                continue
            plain = {k: v.detach() for k, v in tensors.items()}
            new = move(plain, self.seed("weights", purpose))
            signed = C.perturb_buffers(plain, self.seed("weights", purpose + 10))
            drawn = {k: v.detach().clone() for k, v in tensors.items()}
            if not baseline():
                return model
            with torch.no_grad():
                for k, v in tensors.items():
                    v.copy_(new[k])
            if defined():
                continue
            with torch.no_grad():
                for k, v in tensors.items():
                    v.copy_(drawn[k])

            def admit(keys: list[str], cand: dict) -> list[str]:
                """Move ``keys`` to ``cand`` together if the reference stays defined, else each half on its own
                (group testing: k refused tensors of n cost O(k log n) reference calls, not n); the refused."""
                with torch.no_grad():
                    for k in keys:
                        tensors[k].copy_(cand[k])
                if defined():
                    return []
                with torch.no_grad():
                    for k in keys:
                        tensors[k].copy_(drawn[k])
                if len(keys) == 1:
                    return keys
                return admit(keys[: len(keys) // 2], cand) + admit(keys[len(keys) // 2:], cand)

            keys = sorted(tensors)  # the whole group was refused just now: start from its halves
            refused = admit(keys[: len(keys) // 2], new) + admit(keys[len(keys) // 2:], new) if len(keys) > 1 else keys
            if refused:
                refused = admit(refused, signed)
            for f in C.PARAM_SHRINK:  # a domain bounded on both sides (sqrt(1 - a^2) at a = 0.9): the same draw, smaller
                if not refused:
                    break
                refused = admit(refused, {k: drawn[k] + f * (new[k] - drawn[k]) for k in refused})
        # integer buffers (an index map, a permutation: redteam8 h05 assumed its formula) are data too: each is
        # redrawn within the domain its values show (C.redraw_tensor: a permutation permuted, a sorted one sorted,
        # else within its [min, max]), the first variant on which the reference stays defined; bool buffers are a
        # mask's support, structure like the zeros a floating mask keeps (docs/kernels.md, Known gaps)
        # one-element buffers too (a zero point, a shift: redteam10 h02 baked in its init), and a variant that moves
        # nothing (``range`` of a constant) is no variation: the next is tried (``below`` moves a constant c >= 2)
        ints = {k: v for k, v in model.named_buffers() if k in sd and not (v.is_floating_point() or v.is_complex())
                and v.dtype != torch.bool and v.numel() >= 1}
        if ints and not baseline():
            return model
        for i, k in enumerate(sorted(ints)):
            v = ints[k]
            old = v.detach().clone()
            for variant in C.redraw_variants(old):
                new = C.redraw_tensor(old.cpu(), variant, self.seed("weights", 100 + i))
                if torch.equal(new, old.cpu()):
                    continue
                with torch.no_grad():
                    v.copy_(new.to(v.device))
                if defined():
                    break
                with torch.no_grad():
                    v.copy_(old)
        return model

    # -- bookkeeping
    def add(self, f: Finding) -> None:
        if not any(x.code == f.code for x in self.res.findings):
            self.res.findings.append(f)

    def failed(self) -> bool:
        return bool(errors(self.res.findings))

    def seed(self, purpose: str, i: int) -> int:
        return C.derive_seed(self.secret, self.c.seed, purpose, i)

    # -- 2. build
    def build(self) -> bool:
        res, c = self.res, self.c
        res.stage = "build"
        if errors(res.findings):
            e = errors(res.findings)[0]
            res.reason = f"static check {e.code}: {e.message}"
            return False
        end = min(self.deadline, self.t0 + c.compile_timeout_s)
        for spec in self.s.specs:
            left = end - time.monotonic()
            if left <= 1:
                self.builds.append(BuildResult(False, "", spec.name, spec.kind, None,
                                               [CompileError(None, None, "the build budget ran out")]))
                break
            self.builds.append(build(spec, c.cache, left, c.build_jobs, isolate=self.isolate))
        res.builds = [b.to_dict() | {"log_tail": b.log_tail[-800:]} for b in self.builds]
        res.compile_errors = [e for b in self.builds for e in b.errors]
        res.compiled = all(b.ok for b in self.builds) and len(self.builds) == len(self.s.specs)
        self.deadline = time.monotonic() + c.timeout_s  # the run's budget starts now
        if res.compiled:
            return True
        for b in self.builds:
            if b.forbidden:
                self.add(Finding("forbidden_symbol", f"{b.name}: the built extension imports symbols or includes torch kernel headers "
                                 f"outside the allowlist (compute below the dispatcher, torch's ATen/native kernels, "
                                 f"vendor BLAS, dynamic loading, the Python C API, ...): "
                                 + ", ".join(b.forbidden[:12]), "error", "link"))
            for e in b.errors:
                if e.message.startswith("build flag"):
                    self.add(Finding("build_flag", e.message, "error", "build"))
        self.add(Finding("compile_error", "; ".join(f"{e.file}:{e.line}: {e.message}" for e in res.compile_errors[:5])[:2000], "error"))
        res.reason = "compile error: " + (res.compile_errors[0].message if res.compile_errors else "unknown")
        return False

    # -- workers
    def worker(self, mode: str, in_size: int, cpus: list[int] | None) -> Worker:
        c, p = self.c, self.p
        cand = mode == "candidate"
        files: dict[str, str] = {}
        entries, so_names = [], []
        if cand:
            s = self.s
            root = s.path if s.layout == "workspace" else s.path.parent
            names = [s.python_name] + (list(s.python_files) if s.layout == "workspace" else [])
            for n in names:
                files[n] = str(root / n)
            for i, (spec, b) in enumerate(zip(s.specs, self.builds)):
                so_names.append(f"ext/{i}.so")
                files[so_names[-1]] = b.so_path
                entries.append({"spec_key": spec.key(), "kind": spec.kind, "protos": b.protos, "returns": b.returns,
                                "name": spec.name,
                                "so_path": None, "workspace_ext": s.layout == "workspace" and spec.name == "kernel_ext"})
        else:
            files["problem.py"] = str(p.path)
        for e, n in zip(entries, so_names):
            e["so_path"] = n  # relative to the worker's solution dir
        inductor = c.cache / "inductor"
        inductor.mkdir(parents=True, exist_ok=True)
        setup = {"mode": mode, "backend": c.backend, "device": self.device, "threads": c.threads,
                 "inputs_writable": self.inputs_writable, "written": self.written,
                 "construct_seed": self.seed("weights", 0),  # the reference's construction seed (model)
                 "unread_state": self.unread_state,  # state-dict keys the reference's forward never reads (plan)
                 "layout": self.s.layout if cand else "", "python_name": self.s.python_name if cand else "",
                 "builds": entries, "isolate": self.isolate, "mem_mb": c.mem_limit_mb if cand else 0,
                 "cpu_s": int(c.timeout_s * 2) + 30, "max_output_bytes": c.max_output_bytes if cand else 1 << 30,
                 "env": sandbox.base_env({"OMP_NUM_THREADS": str(c.threads), "MKL_NUM_THREADS": str(c.threads)}
                                         | ({"TORCHINDUCTOR_CACHE_DIR": "/inductor" if self.isolate else str(inductor),
                                             "TORCHINDUCTOR_COMPILE_THREADS": "1"} if mode == "compile" else {}))}
        mem = (c.mem_limit_mb + 3072) << 20 if cand else 0
        pids = c.pids_max + 4 * c.threads if cand else 512
        try:
            w = Worker(setup, files, in_size, self.deadline, cpus, pids, mem, str(inductor),
                       candidate_so=so_names, sample_period_ns=c.sample_period_us * 1000)
        except IsolationUnavailable as e:
            raise ShiftkitError(f"{e}; set allow_unisolated=true to run without it (untrusted result)") from None
        self.workers.append(w)
        if cand and not self.res.sandbox:
            self.res.sandbox = {"isolated": self.isolate, "sandbox": "bubblewrap + per-worker namespaces + seccomp"
                                if self.isolate else "none (allow_unisolated)", "cgroup": "v2" if w.group.v2 else "v1",
                                "sampling_period_us": c.sample_period_us}
        import torch

        sd = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        h = w.load(wire.dumps_tensors({"init": self.p.init_inputs(), "state": dict(sd)}))
        if not h.get("ok"):
            raise WorkerFailure(h.get("kind", "load_error") if h.get("kind") in ("state_dict_mismatch", "out_of_memory",
                                                                                  "output_limit") else "load_error",
                                h.get("error", "load failed"), h.get("trace", ""))
        del torch
        return w

    def close_worker(self, w: Worker) -> None:
        if w.attribution is not None and w.setup_mode == "candidate":
            for k, v in w.attribution.counts.items():
                self.counts[k] += v
            self.rounds += w.attribution.rounds
            # a round under the op blocker: its interpreter time is mostly the blocker's (the harness's Python
            # dispatch mode, which the eager party never runs under), so it is not judged against eager's
            self.interp += [None if b else i for i, b in zip(w.attribution.interp, w.blocked)]
            for k, v in w.attribution.tampered.items():
                self.tampered[k] = self.tampered.get(k, 0) + v
            for k, v in w.attribution.foreign_files.items():
                self.foreign_files[k] = self.foreign_files.get(k, 0) + v
            self.lost += w.sampler.lost if w.sampler is not None else 0
        elif w.attribution is not None and w.setup_mode == "reference":
            self.eager_interp[0] += sum(w.attribution.interp)
            self.eager_interp[1] += len(w.attribution.interp)
        w.close()
        if w in self.workers:
            self.workers.remove(w)

    def close(self) -> None:
        for w in list(self.workers):
            try:
                self.close_worker(w)
            except Exception:  # noqa: BLE001 - teardown goes on
                w.kill()

    # -- one candidate round, checked
    def run(self, w: Worker, inputs, expected, where: str, code: str | None = None, block_ops: bool = False,
            scales=None):
        """One round on ``w``; returns (RoundResult, output) or (RoundResult, None) after a finding.
        ``expected``: the reference output; every party (candidate and baselines alike) is asked for outputs
        of its structure, so every party does the same work in the window; only the candidate's are compared,
        with ``scales`` (:meth:`_scales`) giving each element its own budget."""
        in_lay, _ = shm.layout(list(inputs))
        out_lay = shm.mark_aliases(shm.layout(expected)[0], self.ref_alias)
        rr = w.round(list(inputs), in_lay, out_lay, block_ops)
        if w.setup_mode == "candidate":
            self.cand_cpu_ns += rr.cpu_ns
        h = rr.header
        if not w.candidate_files and w.setup_mode != "candidate":
            if not h.get("ok"):
                raise RuntimeError(f"the {w.setup_mode} baseline failed on {where}: {str(h.get('error', ''))[-1500:]}")
            w.poison(out_lay, h)  # not read (the reference's), overwritten as a candidate's are: the same state
            return rr, None  # a baseline's outputs are the reference's: not read
        if h.get("violations"):
            ops = ", ".join(f"{k} x{n}" for k, n in sorted(h["violations"].items()))
            self.add(Finding("blocked_torch_op", f"torch ops ran inside ModelNew.forward: {ops}", "error", where))
            return rr, None
        if not h.get("ok"):
            kind = h.get("kind", "runtime_error")
            fcode = code if code and kind == "output_type" else _WHERE_CODE.get(kind, "runtime_error")
            self.add(Finding(fcode, str(h.get("error", "forward failed"))[:1000], "error", where))
            self.res.reason = self.res.reason or f"{kind} during {where}: {str(h.get('error', ''))[:300]}"
            return rr, None
        out = w.outputs(out_lay, h)
        code_, msg, diff = C.compare(expected, out, self.c.tolerance, self.c.atol, self.c.rtol,
                                     reduced_precision=self.p.allow_reduced_precision, leaf_dtype=self.leaf_dtype,
                                     scales=scales, leaf_slack=self.leaf_slack)
        if code_:
            self.add(Finding(code or code_, msg, "error", where))
            return rr, None
        self.res.max_abs_diff = max(self.res.max_abs_diff or 0.0, diff)
        return rr, out

    # -- 4. correctness
    def plan(self) -> list[dict]:
        """Correctness rounds: inputs, reference, what they are. All computed here, before any runs."""
        import torch

        c, p = self.c, self.p
        model = self.model
        rounds = []
        with torch.no_grad():
            x0 = _to(p.inputs(self.seed("trial", 0)), self.device)
            try:  # where the reference returns a view of its inputs (or its own weights, buffers), so may the candidate
                x1 = C.owned_copy(x0)
                w0 = C.versions(shm.tensor_leaves(x1))
                out1, self.unread_state = C.unread_state(model, *x1)  # tensors a candidate need not hold
                self.ref_alias = shm.output_aliases(out1, [x1, list(model.parameters()), list(model.buffers())])
                # every write is an output (an accumulator's reset, a guard clamp_ of inputs in range), but one
                # the reference returns whole: that is compared as the output it returns
                self.written = output_writes(w0, x1, out1)
                self.ref_alias += [True] * len(self.written)  # the written inputs, returned after the output
                # a reference that works in place on its inputs (x.mul_(w); return x): the parent's input region is
                # read-only to every worker, so each party gets writable copies of it, refilled every round. Its
                # values may not change (a guard clamp_ on inputs in range), its version counters do (redteam10 hn22)
                self.inputs_writable = not C.same_tensors(x1, x0) or bool(written_inputs(w0, x1))
            except Exception:  # noqa: BLE001 - the reference fails: its rounds say so
                self.ref_alias = []
            sources: list = []
            for k in range(c.trials):
                x = p.inputs(self.seed("trial", k))
                exp = None
                if k == 0:  # which floating tensors the reference read as Python numbers, and their dtypes
                    try:
                        exp, sources = C.scalar_sources(self.reference, x)
                    except Exception:  # noqa: BLE001 - not under the recording mode: no sources (the widest rule)
                        exp, sources = None, []
                if exp is None:
                    exp = self.reference(x)
                rounds.append({"kind": "own", "where": f"trial {k}", "inputs": x, "expected": exp})
            self.inf_by_design = not _all_finite(rounds[0]["expected"])
            widest = C.leaf_dtype_of(rounds[0]["inputs"], list(model.state_dict().values()))
            leaves = any(True for _ in C.float_leaves(rounds[0]["expected"]))
            try:  # every round's element budgets (_scales), the transforms' checks and the leaves' precision
                self.m64 = copy.deepcopy(model).double()
            except Exception as e:  # noqa: BLE001
                self.m64 = None
                self.res.tolerance = f"per-tensor: the reference cannot be copied to float64 ({type(e).__name__})"
            # a Python-float leaf is held to the precision the reference computed it in, measured against the
            # float64 reference on the own trials and never tighter than the tensor it was read from
            self.leaf_dtype = C.leaf_dtypes([r["expected"] for r in rounds], [self._reference64(r["inputs"]) for r in rounds],
                                            sources, widest, c.tolerance) if leaves else widest
            if leaves:  # and an absolute slack of its rounding noise, the largest over the own trials (C.leaf_noise)
                gen = torch.Generator().manual_seed(self.seed("leaf_noise", 0))
                self.leaf_slack = {path: 0.0 for path, _ in C.float_leaves(rounds[0]["expected"])}
                for r in rounds:
                    self.leaf_slack = self._leaf_slack(r["inputs"], r["expected"], gen)
            if c.transforms:
                base = rounds[0]
                for i, name in enumerate(C.TRANSFORMS):
                    if name == "sparse" and C.all_discrete(base["expected"]):
                        continue
                    if not C.applies(name, base["inputs"]):
                        continue
                    for f in C.ladder(name, base["inputs"]):
                        x = C.transform(base["inputs"], name, self.seed("transform", i), f)
                        exp = self._checked_reference(x)
                        if exp is None:
                            continue
                        what = f"{name} x{f:g}" if f else name
                        rounds.append({"kind": name, "where": f"{what} inputs", "inputs": x, "expected": exp})
                        self.spot_kinds.append((name, f))
                        break
                self._plan_discrete(base, rounds)
                self._plan_scalars(base, rounds)
                if C.has_float(base["inputs"]):  # a near-repeat: a cache keyed on a sample of the input is stale
                    x = C.perturb(base["inputs"], p.inputs(self.seed("perturb", 0)), self.seed("perturb", 1))
                    exp = self._checked_reference(x)
                    if exp is not None:
                        rounds.append({"kind": "perturb", "where": "near-repeat inputs", "inputs": x, "expected": exp,
                                       "after_repeat": True})
                        self.spot_kinds.append(("perturb", None))
            if c.shape_variants:
                for i, var in enumerate(p.shape_variants):
                    x = p.inputs(self.seed("variant", i), var)
                    rounds.append({"kind": "shape_variant", "where": f"shape variant {var}", "inputs": x,
                                   "expected": self.reference(x), "code": "shape_variant_mismatch"})
                rounds += self._drawn_variants()
        if c.determinism:
            rounds.append({"kind": "repeat", "where": "determinism", "inputs": rounds[0]["inputs"],
                           "expected": rounds[0]["expected"], "repeat": True})
        late = [r for r in rounds if r.get("after_repeat")]  # the near-repeat comes last, after the exact repeat
        rounds = [r for r in rounds if not r.get("after_repeat")] + late
        for r in rounds:  # each element's own budget (correctness.element_scales), for every round compared
            r["scales"] = rounds[0]["scales"] if r.get("repeat") else self._scales(r["inputs"], r["expected"])
        # a write on any planned round's inputs (a data-dependent in-place branch) counts too: workers start after
        self.inputs_writable = self.inputs_writable or self.writes_inputs
        return rounds

    def _plan_discrete(self, base: dict, rounds: list[dict]) -> None:
        """Every integer and bool input varied on its own, within the domain its values show
        (:func:`C.redraw_tensor`): a redraw (bool: at the original's density, then with a True in every row, then
        rows permuted; integers: within [min, max], sorted where the original is, then rows permuted), the first
        variant on which the reference is well defined; then :func:`C.extra_variants` as rounds of their own
        (int64 beyond 2^53, ``far``; narrower integers over their whole range, ``full``; bool with whole rows
        False and True, ``empty``, else True, ``dense``). Each admitted one is a correctness round and a spot kind."""

        ts = list(C._tensors(base["inputs"]))
        for t in C.discrete_targets(base["inputs"]):
            for variants in (C.redraw_variants(ts[t]),) + C.extra_variants(ts[t]):
                for v in variants:
                    x = C.redraw(base["inputs"], t, v, self.seed(f"redraw_{v}", t))
                    if C.same_tensors(x, ts):
                        continue  # nothing changed (a constant tensor): not a round
                    if v == "full" and not self._shapes_value_independent(x, base["expected"]):
                        continue  # values as sizes (bincount, one_hot): 2^31 would allocate gigabytes here
                    exp = self._checked_reference(x)
                    if exp is None:
                        continue
                    rounds.append({"kind": "redraw", "where": f"redraw {v} of input tensor {t} inputs", "inputs": x,
                                   "expected": exp})
                    self.spot_kinds.append(("redraw", (t, v)))
                    break

    def _plan_scalars(self, base: dict, rounds: list[dict]) -> None:
        """Every Python-float input (:func:`C.scalar_targets`: a temperature, an epsilon passed to ``forward``)
        moved on its own by a factor 2^(+-u) from the secret (:func:`C.rescale_scalar`), the largest fraction of
        the move on which the reference is well defined; a correctness round and a spot kind each (redteam7 h08:
        a kernel that baked in tau = 0.5 passed, since only tensors were ever varied); and far each way
        (:func:`C.rescale_scalar_far`, x 2^(+-7..8)), a correctness round each where the reference is defined there
        (redteam9 h12: a LeakyReLU right only for slopes below 1)."""
        for t in C.scalar_targets(base["inputs"]):
            for frac in C.SCALAR_MOVES:
                x = C.rescale_scalar(base["inputs"], t, self.seed("scalar", t), frac)
                exp = self._checked_reference(x)
                if exp is None:
                    continue
                rounds.append({"kind": "scalar", "where": f"scalar {t} moved inputs", "inputs": x, "expected": exp})
                self.spot_kinds.append(("scalar", (t, frac)))
                break
            for up in (True, False):  # far each way (x 2^7..2^8), each a round where the reference is defined there
                x = C.rescale_scalar_far(base["inputs"], t, self.seed("scalar_far", 2 * t + up), up)
                exp = self._checked_reference(x)
                if exp is not None:
                    rounds.append({"kind": "scalar", "where": f"scalar {t} moved far {'up' if up else 'down'} inputs",
                                   "inputs": x, "expected": exp})
            for frac in C.SCALAR_MOVES:  # an integral value (an exponent 3.0) moved by integers too (redteam10 h01)
                x = C.move_integral(base["inputs"], t, self.seed("scalar_int", t), frac)
                exp = None if x is None else self._checked_reference(x)
                if exp is not None:
                    rounds.append({"kind": "scalar", "where": f"scalar {t} moved by an integer inputs", "inputs": x,
                                   "expected": exp})
                    break
        # Python ints (a shift, an offset; redteam9 h03 baked in a roll by 37): moved where the reference's output
        # keeps its shapes and dtypes (a size or a dim changes them, or makes the reference raise: not moved)
        for t in C.int_targets(base["inputs"]):
            moves = [C.move_int(base["inputs"], t, self.seed("int", t), frac) for frac in C.SCALAR_MOVES]
            for x in moves + [C.rescale_int(base["inputs"], t, up) for up in (True, False)]:  # sparse domains too
                exp = self._same_shapes_reference(x, base)
                if exp is not None:
                    rounds.append({"kind": "scalar", "where": f"int {t} moved inputs", "inputs": x, "expected": exp})
                    break
        # Python bools (a causal flag): flipped where the output keeps its shapes (redteam12 h03 ignored the flag)
        for t in C.bool_targets(base["inputs"]):
            x = C.flip_bool(base["inputs"], t)
            exp = self._same_shapes_reference(x, base)
            if exp is not None:
                rounds.append({"kind": "scalar", "where": f"bool {t} flipped inputs", "inputs": x, "expected": exp})

    def _same_shapes_reference(self, x, base: dict):
        """The reference on ``x`` (None for no inputs) where it is well defined and keeps ``base``'s output shapes
        and dtypes (a moved int or bool that is a size, a dim or ``keepdim`` changes them), else None."""
        exp = None if x is None else self._checked_reference(x)
        return exp if exp is not None and C.shapes_of(exp) == C.shapes_of(base["expected"]) else None

    def _shapes_value_independent(self, x, expected) -> bool:
        """Does the reference give ``expected``'s shapes on ``x`` without reading any value as a size? Run under
        torch's fake tensors (shapes only, no memory): an op whose output shape depends on values (``bincount``,
        ``nonzero``, ``.item()`` into a size) raises there. The ``full`` redraw puts int32 values up to 2^31 into
        the reference, which must not allocate by them in the parent."""
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.utils._pytree import tree_map

        def shapes(o):
            return [(tuple(t.shape), t.dtype) for t in C._tensors(o)]

        try:
            with FakeTensorMode(allow_non_fake_inputs=True) as mode, torch.no_grad():
                fx = tree_map(lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t, list(x))
                fxs = _to(fx, self.device)
                got = shapes(self._call(self.model, fxs))
        except Exception:  # noqa: BLE001 - data-dependent, or an op fake tensors do not cover: not admitted
            return False
        return got == shapes(expected)

    def _drawn_variants(self) -> list[dict]:
        """Rounds on shapes the harness draws itself (:func:`C.draw_variants`: the globals the declared
        variants vary, moved from the secret to every remainder mod 8 of their defaults, in distinct 8-blocks), each only where
        ``get_init_inputs`` does not change under it, the inputs' shapes do, and the reference runs on them."""
        p = self.p
        declared = p.shape_variants
        if not declared:
            return []
        defaults = {k: getattr(p.module, k) for v in declared for k in v if hasattr(p.module, k)}
        out = []
        try:
            init0 = repr(p.init_inputs())
            shapes0 = [tuple(t.shape) for t in C._tensors(p.inputs(self.seed("trial", 0)))]
        except Exception:  # noqa: BLE001 - no inputs to compare with: no drawn rounds
            return []
        for i, var in enumerate(C.draw_variants(defaults, declared, self.seed("drawn_variant", 0))):
            try:
                with p.variant(var):
                    same_init = repr(p.init_inputs()) == init0
                x = p.inputs(self.seed("variant", len(declared) + i), var)
                if not same_init or [tuple(t.shape) for t in C._tensors(x)] == shapes0:
                    continue
                exp = self.reference(x)
            except Exception:  # noqa: BLE001 - the reference does not run there: no such round
                continue
            out.append({"kind": "shape_variant", "where": f"drawn shape variant {var}", "inputs": x, "expected": exp,
                        "code": "shape_variant_mismatch"})
        return out

    def _checked_reference(self, x):
        """The reference output on transformed inputs, or None where it is not well defined there (it raises,
        overflows where float64 does not, or disagrees with float64 beyond the budget)."""
        try:
            exp = self.reference(x)
        except Exception:  # noqa: BLE001 - e.g. an index moved out of range: not a valid input
            return None
        return exp if self._well_defined(x, exp) else None

    def _call(self, model, xs):
        """``model``'s output on ``xs`` with the inputs the reference writes (:func:`with_writes`): what every
        reference call (fp32, float64, fake tensors, moved inputs) compares."""
        return with_writes(model(*xs), xs, self.written)

    def reference(self, x):
        """The reference's output on ``x``, on the CPU (every expected value of every round comes from here)."""
        import torch

        with torch.no_grad():
            xs = _to(C.owned_copy(x), self.device)
            v0 = C.versions(xs)
            out = _cpu(C.owned_copy(self._call(self.model, xs)))
            self.writes_inputs = self.writes_inputs or C.versions(xs) != v0  # see plan: inputs_writable
            return out

    def _reference64(self, x, keep: bool = True):
        """The float64 reference's output on ``x`` (inputs and weights in float64), or None where it has none.
        The last call's is kept (unless ``keep`` is False): a round checked for definedness (:meth:`_well_defined`)
        then gets its element scales (:meth:`_scales`) on the same inputs object, and the float64 run is not
        repeated."""
        import torch

        if self.m64 is None:
            return None
        if keep and self._last64 is not None and self._last64[0] is x:
            return self._last64[1]
        try:
            with torch.no_grad():
                xs = _to(C.owned_copy(_double(x)), self.device)
                out = _cpu(C.owned_copy(self._call(self.m64, xs)))
        except Exception:  # noqa: BLE001 - the model has no fp64 path
            out = None
        if keep:
            self._last64 = (x, out)
        return out

    def _scales(self, x, e):
        """Each floating output's element scales on ``x`` (:func:`C.scales_tree`): the float64 reference and
        :data:`C.SENSITIVITY_DRAWS` runs of it with every floating input and weight moved by a rounding-sized
        relative amount (:func:`C.moved_relative`; buffers are not moved: a float mask's 1 or a table is structure,
        and a product's terms move with its input). None where the reference has no float64 path: every round
        then keeps the tensor-wide budget, and :attr:`Result.tolerance` says so."""
        import torch

        if not C.has_float(e):
            return None
        e64 = self._reference64(x)
        if e64 is None:
            if not self.res.tolerance.startswith("per-tensor"):
                self.res.tolerance = "per-tensor: the reference has no float64 path"
            return None
        self._n_scales += 1
        gen = torch.Generator().manual_seed(self.seed("sensitivity", self._n_scales))
        params = [t for t in self.m64.parameters() if t.is_floating_point() or t.is_complex()]
        saved = [t.detach().clone() for t in params]
        sumsq = None
        x64 = _double(x)  # once: every draw moves the same float64 inputs
        try:
            with torch.no_grad():
                for _ in range(C.SENSITIVITY_DRAWS):
                    for t, v in zip(params, saved):
                        t.copy_(C.moved_relative(v, gen))
                    xs = _to(C.owned_copy(C.moved_relative(x64, gen)), self.device)
                    out = _cpu(self._call(self.m64, xs))
                    sumsq = C.add_tree(sumsq, C.squared_change(e64, out))
        except Exception as err:  # noqa: BLE001 - a float64 reference that fails on moved inputs: said, not hidden
            self.res.tolerance = f"per-tensor: the float64 reference failed on moved inputs ({type(err).__name__})"
            return None
        finally:
            with torch.no_grad():
                for t, v in zip(params, saved):
                    t.copy_(v)
        if not self.res.tolerance:
            self.res.tolerance = "per-element"
        tree = C.scales_tree(e, e64, sumsq, C.SENSITIVITY_DRAWS)
        if self.leaf_slack:  # each Python-float leaf's rounding noise on this round's inputs (the plan's at least)
            return C.with_leaf_slack(tree, e, self._leaf_slack(x, e, gen))
        return tree

    def _leaf_slack(self, x, e, gen) -> dict[str, float]:
        """:data:`C.LEAF_NOISE` times each Python-float leaf's :func:`C.leaf_noise` around ``x`` (the reference
        and its float64 twin on :data:`C.SENSITIVITY_DRAWS` rounding-sized moves of ``x``: its own rounding error
        over several draws), never below the plan's (:attr:`leaf_slack`): a shifted round's sums are worse
        conditioned than the own trials'."""
        xs = [C.moved_relative(x, gen) for _ in range(C.SENSITIVITY_DRAWS)]
        got = C.leaf_noise([self.reference(v) for v in xs], [self._reference64(v, keep=False) for v in xs])
        return {p: max(v, C.LEAF_NOISE * got.get(p, 0.0)) for p, v in self.leaf_slack.items()}

    def _well_defined(self, x, exp) -> bool:
        e64 = self._reference64(x)
        if e64 is None:  # no float64 reference (none built, or no fp64 path): accept only finite references
            return _all_finite(exp)
        if not C.finite_where(exp, e64):
            return False
        # infinities are admitted only where the problem has them by design (its own trial 0), and only the same
        # ones as the float64 twin's; an overflow elsewhere, or a NaN, still drops the round
        if not _all_finite(e64) and not (self.inf_by_design and C.infinities_agree(exp, e64)):
            return False
        # a Python-float leaf is held to the budget of the dtype the reference computed it in (as in every round):
        # with the float64 budget an fp32 mean never agreed with its fp64 twin, and every transform was dropped
        code, _, _ = C.compare(exp, C.to_dtype_of(e64, exp), self.c.tolerance, self.c.atol, self.c.rtol,
                               reduced_precision=self.p.allow_reduced_precision, leaf_dtype=self.leaf_dtype,
                               leaf_slack=self.leaf_slack)
        return code is None

    def correctness(self) -> None:
        res, c = self.res, self.c
        res.stage = "correctness"
        rounds = self.plan()
        in_max = max(shm.nbytes(list(r["inputs"])) for r in rounds)
        cpus = self._cpus(0)
        w = self.worker("candidate", in_max, cpus)
        first = None
        for r in rounds:
            _, out = self.run(w, r["inputs"], r["expected"], r["where"], r.get("code"), block_ops=c.block_ops,
                              scales=r["scales"])
            res.rounds.append({"kind": r["kind"], "where": r["where"], "ok": out is not None})
            if out is None:
                if r.get("repeat"):
                    f = [x for x in res.findings if x.where == "determinism"]
                    if f and f[0].code == "output_mismatch":
                        res.findings[res.findings.index(f[0])] = dataclasses.replace(f[0], code="nondeterministic")
                break
            if first is None:
                first = out
        self.correct_worker = w
        res.correct = not self.failed()

    def _cpus(self, block: int) -> list[int] | None:
        if not self.c.pin_cpu:
            return None
        cpus = _pin_cpus()
        if not cpus:
            return None
        n = min(self.c.threads, len(cpus))
        start = (block * n) % len(cpus)
        return sorted((cpus * 2)[start:start + n])

    # -- 5. paired profiling
    def profile(self) -> None:
        import torch

        res, c, p = self.res, self.c, self.p
        res.stage = "profile"
        n0, per, max_blocks = block_plan(c.timed_calls, c.timing_blocks, c.max_timed_calls, c.min_block_rounds)
        kinds = ["eager"] + (["compile"] if c.baseline_compile else [])
        timer = c.effective_timer
        thr = threshold(c.margin)
        x0 = p.inputs(self.seed("warmup", 0))
        e0 = self.reference(x0)
        s0 = self._scales(x0, e0)
        in_size = shm.nbytes(list(x0))
        flush = torch.empty(max(1, _flush_bytes(c) // 4), dtype=torch.float32) if _flush_bytes(c) else None
        done_blocks, paired, block_info = [], [], []
        prev = x0
        wall = {n: [] for n in ["candidate"] + kinds}
        cpu = {n: [] for n in ["candidate"] + kinds}
        cis, decisions, need = {}, {}, False
        kept: dict[str, Worker] = {}
        io_bytes = 0
        rnd = nat = 0  # rounds run and compared / natural rounds timed
        block_s: list[float] = []  # each finished block's wall time (workers, warm-ups, rounds, reference work)
        stopped = None
        while len(done_blocks) < max_blocks:
            i = len(done_blocks)
            if i >= MIN_BLOCKS_JUDGED and not budget_allows(time.monotonic(), self.deadline, block_s):
                stopped = "budget"  # another block would outrun the evaluation's budget: inconclusive, not a timeout
                break
            tb = time.monotonic()
            cpus = self._cpus(i)
            if kept:
                parties = dict(kept)
            else:
                parties = {"candidate": self.correct_worker if i == 0 else self.worker("candidate", in_size, cpus)}
                for kind in kinds:
                    parties[kind] = self.worker("reference" if kind == "eager" else "compile", in_size, cpus)
                if not c.respawn_blocks:
                    kept = dict(parties)
            for name, w in parties.items():  # equal warm-up; the compile baseline compiles here
                for k in range(c.warmup):
                    _, out = self.run(w, x0, e0, f"warm-up {k}", "timed_output_mismatch", scales=s0)
                    if name == "candidate" and out is None:
                        return
            bw = {n: [] for n in parties}
            bc = {n: [] for n in parties}
            names = list(parties)
            spots = spot_plan(per, i, len(self.spot_kinds), self.seed("spots", i))
            for j in range(per + len(spots)):
                x = p.inputs(self.seed("timed", rnd))
                e, what = None, ""
                if j in spots:  # a round on the checked domain, compared and out of the clock
                    name, f = self.spot_kinds[spots[j]]
                    if name == "perturb":
                        xs = C.perturb(prev, x, self.seed("spot", rnd))
                    elif name == "redraw":
                        xs = C.redraw(x, f[0], f[1], self.seed("spot", rnd))
                    elif name == "scalar":
                        xs = C.rescale_scalar(x, f[0], self.seed("spot", rnd), f[1])
                    else:
                        xs = C.transform(x, name, self.seed("spot", rnd), f)
                    e = self._checked_reference(xs)
                    if e is not None:
                        x, what = xs, f" ({name} inputs)"
                if e is None:
                    e = self.reference(x)
                # each element's own budget on every spot round and on a secret 1 in SCALED_TIMED of the natural
                # ones (computed out of the clock, before any party runs); the rest keep the tensor-wide budget:
                # a kernel wrong only where the per-element budget sees it cannot tell which rounds those are
                sc = self._scales(x, e) if (j in spots or self.seed("budget", rnd) % SCALED_TIMED == 0) else None
                prev = x
                io_bytes = io_bytes or shm.nbytes(list(x)) + shm.nbytes(e)
                k = rnd % len(names)
                order = names[k:] + names[:k]
                if (rnd // len(names)) % 2:
                    order = order[::-1]
                for name in order:
                    if flush is not None:
                        _flush(flush, cpus)
                    rr, out = self.run(parties[name], x, e, f"timed call {rnd}{what}", "timed_output_mismatch", scales=sc)
                    if name == "candidate" and out is None:
                        return
                    bw[name].append(rr.wall_ns)
                    bc[name].append(rr.cpu_ns)
                rnd += 1
            bw, bc = clock_times(bw, spots), clock_times(bc, spots)  # natural rounds only: spots are out of the clock
            nat += per
            for n in parties:
                wall[n] += bw[n]
                cpu[n] += bc[n]
            t = bc if timer == "cpu" else bw
            paired.append({b: list(zip(t[b], t["candidate"])) for b in kinds})
            per_round = {b: stats.log_ratios(t[b], t["candidate"]) for b in kinds}
            block_info.append({"cpus": cpus, "rounds": per, "spot_rounds": len(spots), **{b: math.exp((stats.block_values([paired[-1][b]]) or [math.nan])[0]) for b in kinds},
                               "ci": {b: [math.exp(v) for v in stats.median_ci(per_round[b], c.ci_level)[::2]] for b in kinds}})
            done_blocks.append(i)
            block_s.append(time.monotonic() - tb)
            if c.respawn_blocks:
                for w in list(parties.values()):
                    self.close_worker(w)
            if len(done_blocks) < n0:
                continue
            cis, decisions = block_decisions(paired, thr, c.ci_level)
            need = more_blocks_needed(decisions)
            if not need:
                break
        if stopped and len(done_blocks) < n0:  # stopped before the plan's first decision: decided on what ran
            cis, decisions = block_decisions(paired, thr, c.ci_level)
            need = more_blocks_needed(decisions)
        names = ["candidate"] + kinds
        res.timings = {n: timing_summary(wall[n], cpu[n], timer) for n in names}
        res.paired = {b: {"speedup": math.exp(cis[b][1]), "ci": [math.exp(cis[b][0]), math.exp(cis[b][2])],
                          "decision": decisions[b], "threshold": thr} for b in cis}
        res.paired.update({"rounds": nat, "rechecked": rnd, "spot_rounds": rnd - nat, "timer": timer, "blocks": block_info,
                           "interval": "student_t over the blocks' mean-cost ratios" if len(done_blocks) > 1
                           else "order statistics over rounds (one block)", "stopped": stopped})
        if c.floor_bandwidth_factor > 0 and io_bytes:
            # information for a reviewer, never a rejection: the floor comes from a bandwidth measured on a shared
            # machine, and an honest kernel may move fewer bytes (a view of its input); the parent-owned data path
            # (inputs written before the thaw, outputs read after the freeze, every output compared) is the guarantee
            floor_ms = io_bytes / (c.floor_bandwidth_factor * memory_bandwidth(self.device)) * 1e3
            res.paired["floor_ms"] = floor_ms
            if res.timings["candidate"]["median_ms"] < floor_ms:
                self.add(Finding("below_physical_floor", f"median {res.timings['candidate']['median_ms']:.4f} ms is below the "
                                 f"memory-bandwidth floor {floor_ms:.4f} ms for {io_bytes} bytes (review: not a rejection)",
                                 "review", "timing"))
        res.inconclusive = any(v == "undecided" for v in decisions.values()) and need
        if not self.failed():
            res.speedup_eager = res.paired["eager"]["speedup"]
            res.speedup_compile = res.paired["compile"]["speedup"] if "compile" in res.paired else None

    # -- 6. attribution
    def attribute(self) -> None:
        for w in list(self.workers):
            if w.setup_mode in ("candidate", "reference"):
                self.close_worker(w)
        counts = self.counts
        total = sum(counts.values())
        self.res.sandbox["samples"] = dict(counts)
        if self.foreign_files:
            top = sorted(self.foreign_files.items(), key=lambda kv: -kv[1])[:5]
            self.res.sandbox["foreign_files"] = {k: v for k, v in top}
        if self.tampered:
            names = ", ".join(sorted(self.tampered)[:3])
            self.add(Finding("tampered_mapping", f"executable mappings naming the candidate's own file or a runtime library "
                             f"that are not clean mappings of its executable segments (copy-on-write pages, data mapped "
                             f"executable, or more mappings than segments): {names}"[:1000], "error", "sampling"))
        e_interp, e_rounds = self.eager_interp
        allow = INTERP_ALLOWANCE * e_interp / e_rounds if e_rounds else None
        judged = [i for i in self.interp if i is not None]
        self.res.sandbox["interpreter"] = {
            "samples": sum(judged), "rounds": len(judged), "blocked_rounds": len(self.interp) - len(judged),
            "eager_per_round": round(e_interp / e_rounds, 3) if e_rounds else None,
            "allowance_per_round": round(allow, 3) if allow is not None else None,
            "excess": judged_excess(self.interp, allow)}
        if allow is None:
            self.res.sandbox["interpreter"]["note"] = "not judged: no eager party was timed (profile off or not reached)"
        v = foreign_verdict(counts, self.c.foreign_share_max, rounds=self.rounds, interp=self.interp, interp_allow=allow)
        if v:
            self.add(Finding(v[0], v[1], "error", "sampling"))
        expect = self.cand_cpu_ns / (self.c.sample_period_us * 1000)
        self.res.sandbox["sample_coverage"] = round((total + self.lost) / expect, 3) if expect else None
        if self.lost:
            self.res.sandbox["samples_lost"] = self.lost
        msg = coverage_verdict(total + self.lost, self.cand_cpu_ns, self.c.sample_period_us)
        if msg:
            self.add(Finding("sampling_evaded", msg, "error", "sampling"))


def _flush(buf, cpus: list[int] | None) -> None:
    """Evict the last-level cache from the parent, on the block's CPU (the worker tree is frozen)."""
    old = None
    if cpus:
        try:
            old = os.sched_getaffinity(0)
            os.sched_setaffinity(0, set(cpus))
        except OSError:
            old = None
    buf.add_(1.0)
    if old is not None:
        try:
            os.sched_setaffinity(0, old)
        except OSError:
            pass


def _to(x, device):
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device) if x.device.type != device else x
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _cpu(x):
    return _to(x, "cpu")


def _double(x):
    import torch

    if isinstance(x, torch.Tensor):
        return x.double() if x.is_floating_point() else (x.to(torch.complex128) if x.is_complex() else x)
    if isinstance(x, (list, tuple)):
        return type(x)(_double(v) for v in x)
    return x


def _all_finite(x) -> bool:
    import torch

    if isinstance(x, torch.Tensor):
        return not (x.is_floating_point() or x.is_complex()) or bool(torch.isfinite(C.wide(x)).all())
    if isinstance(x, (list, tuple)):
        return all(_all_finite(v) for v in x)
    if isinstance(x, dict):
        return all(_all_finite(v) for v in x.values())
    return True


# ----------------------------------------------------------------------------- the whole protocol

def _finish(res: Result, config: EvalConfig) -> Result:
    errs = errors(res.findings)
    res.correct = res.correct and not errs
    if config.reward == "milestone" and res.paired and res.correct:
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
        res.reward = -1.0 if not any(f.code in PROBLEM_FAULTS for f in res.findings) else 0.0
        why = res.reason or (f"{errs[0].code}: {errs[0].message}" if errs else "incorrect")
        res.inconclusive = False
    if res.sandbox.get("isolated") is False and not any(f.code == "untrusted_result" for f in res.findings):
        res.findings.append(Finding("untrusted_result", f"ran without the sandbox ({isolation_problem()})", "review"))
    res.reason = why
    return res


def _run(ev: _Evaluation) -> None:
    res, c = ev.res, ev.c
    avail, why = get_backend(c.backend).available()
    if not avail:
        raise ShiftkitError(f"backend {c.backend!r} is not available here: {why}")
    res.findings = list(ev.s.findings)
    if not ev.build():
        return
    res.stage = "admission"
    adm = admit_problem(ev.p, c) if c.check_degenerate else []
    if adm:
        res.findings += adm
        res.reason = f"problem not admitted: {adm[0].message}"
        return
    try:
        res.stage = "load"
        ev.correctness()
        if res.correct and c.profile:
            ev.profile()
    except (WorkerFailure, AttributionLimit) as e:  # AttributionLimit: the parent could not attribute the samples
        if e.violations:
            ops = ", ".join(f"{k} x{n}" for k, n in sorted(e.violations.items()))
            ev.add(Finding("blocked_torch_op", f"torch ops ran inside ModelNew.forward: {ops}", "error", res.stage))
        known = ("worker_crash", "timeout", "out_of_memory", "output_limit", "runtime_error", "load_error",
                 "state_dict_mismatch", "protocol_violation", "too_many_mappings", "output_unwritten", "output_layout")
        ev.add(Finding(e.code if e.code in known else "runtime_error", e.message[:1000], "error", res.stage))
        res.reason = f"{e.code} during {res.stage}: {e.message[:300]}"
        if e.log_tail:
            res.sandbox["log_tail"] = e.log_tail[-1500:]
    finally:
        ev.attribute()
    if res.speedup_eager is not None:
        best = max(x for x in (res.speedup_eager, res.speedup_compile) if x is not None)
        if best > c.implausible_speedup:
            res.findings.append(Finding("implausible_speedup", f"speedup {best:.1f}x exceeds {c.implausible_speedup:g}x: review", "review"))
    res.correct = not ev.failed() and bool(res.rounds) and all(r["ok"] for r in res.rounds)
    res.stage = "done"


def evaluate(problem, solution, config: EvalConfig | None = None) -> Result:
    """Evaluate one solution against one problem. Never raises for anything the candidate does: every failure
    is a Result with findings and a reason, within ``compile_timeout_s + timeout_s`` plus a fixed slack.
    Raises ShiftkitError for user/harness conditions (missing files, bad config, backend or sandbox unavailable)."""
    config = config or EvalConfig()
    config.validate()
    t0 = time.perf_counter()
    p, s = _resolve(problem, solution, config)
    res = Result(problem=p.name, solution=str(s.path))
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    ev = None
    try:
        ev = _Evaluation(p, s, config, res)
        _run(ev)
    except ShiftkitError:
        raise
    except Exception as e:  # noqa: BLE001 - the one boundary: a harness failure is a finding, never a crash
        msg = f"{type(e).__name__}: {e}"
        res.findings.append(Finding("harness_error", msg if len(msg) < 2000 else msg[:1000] + " ... " + msg[-1000:], "error", res.stage))
        res.correct = False
        res.reason = f"harness error during {res.stage}: {type(e).__name__}"
    finally:
        if ev is not None:
            ev.close()
        torch.set_num_threads(prev)
        res.seconds = time.perf_counter() - t0
    _finish(res, config)
    return res


def compile_only(problem, solution, config: EvalConfig | None = None) -> Result:
    """Static checks + build, no execution: structured compile errors for agent tools."""
    config = config or EvalConfig()
    config.validate()
    t0 = time.perf_counter()
    p, s = _resolve(problem, solution, config)
    res = Result(problem=p.name, solution=str(s.path))
    try:
        ev = _Evaluation(p, s, config, res)
        res.findings = list(s.findings)
        ev.build()
    except ShiftkitError:
        raise
    except Exception as e:  # noqa: BLE001
        res.findings.append(Finding("harness_error", f"{type(e).__name__}: {str(e)[:500]}", "error", res.stage))
    res.reward, res.reason = (0.0, "compiled") if res.compiled and not errors(res.findings) else (-1.0, res.reason or "not compiled")
    res.seconds = time.perf_counter() - t0
    return res
