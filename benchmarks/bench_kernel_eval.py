"""Benchmark of the kernel environment (issues #5, #10, #17) on this machine.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_kernel_eval.py [--quick] [--out benchmarks/results/kernel_eval.json]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_kernel_eval.py --sections sandbox,suite,rewards   # issue #17's numbers

Measures
1. evaluations per minute with a warm build cache (verify-only, and full profile with cached baselines);
2. compile time cold vs cached (lean C ABI kernel and a load_inline torch binding);
3. timing stability: coefficient of variation of the candidate's median over 10 repeated evaluations
   (goal < 3 %), plus speedups vs eager and torch.compile for every correct fixture;
3b. reward stability (issue #10, section ``rewards``): 3 honest solutions near a threshold (one vs
   torch.compile for +3, two vs eager for +2) and 3 clearly fast or slow, 10 repeated full evaluations each
   (paired timing in independent worker blocks; 1 thread): the flip rate (the
   fraction of repeats whose reward differs from the mode), the inconclusive count and the CV of the paired
   speedup, written under ``reward_flip_rate`` and ``paired_ratio_cv``; ``diagnose``: the between-block spread
   with the same workers reused in every block; ``rewards_single_block``: the single-block design at the same
   load, for the comparison;
3c. ``suite`` (issue #17): every fixture of tests/adversarial/test_hacks.py once: the catch rate by family and
   the honest pass rate; ``sandbox``: a worker's start-up and a round's fixed cost;
4. the same solutions judged side by side by a re-implementation of KernelBench's harness semantics
   (HEAD 423217d, per cuda_agent.md section 2.3: candidate exec'd in the checker's process, weights by
   seeding, no .eval(), inputs shared (not cloned), reference first, 5 seeded trials, allclose 1e-4, and
   the STRICT group of its regex static checker) - which hacks each harness catches.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from shiftkit.kernels import EvalConfig, evaluate, load_problem, load_solution  # noqa: E402
from shiftkit.kernels.build import build  # noqa: E402
from shiftkit.kernels.fixtures import PROBLEMS, SOLUTIONS  # noqa: E402
from shiftkit.kernels.stats import cv  # noqa: E402

ADV = REPO / "tests" / "adversarial" / "solutions"
CORRECT = [
    ("fused_bias_relu_residual", "correct.py"), ("scale_shift_clamp", "correct.py"), ("row_softmax", "correct.py"),
    ("layernorm_gelu", "workspace"), ("rowsum_scale", "correct.py"), ("kb_l1_19_ReLU", "correct.py"),
    ("kb_l1_47_Sum_reduction_over_a_dimension", "correct.py"), ("kb_l1_94_MSELoss", "correct.py"),
    ("kb_l1_100_HingeLoss", "correct.py"), ("kb_l1_1_Square_matrix_multiplication", "correct.py"),
]
# (solution, problem, kind): kind "hack" must be rejected, "wrong" too, "correct" must pass
SIDE_BY_SIDE = [(f"adv:{p.stem}", "rowsum_scale" if p.stem in ("constant_output", "precision_fp16", "cpp_thread")
                 else "kb_l1_19_ReLU" if p.stem == "torch_op_in_cpp" else "scale_shift_clamp", "hack")
                for p in sorted(ADV.glob("*.py")) if p.stem not in ("constant_output_degenerate",)]
SIDE_BY_SIDE += [("fix:kb_l1_19_ReLU/wrong_off_by_one.py", "kb_l1_19_ReLU", "wrong"),
                 ("fix:kb_l1_47_Sum_reduction_over_a_dimension/wrong_axis.py", "kb_l1_47_Sum_reduction_over_a_dimension", "wrong"),
                 ("fix:row_softmax/wrong_race.py", "row_softmax", "wrong")]
SIDE_BY_SIDE += [(f"fix:{p}/{s}", p, "correct") for p, s in CORRECT if s != "workspace"]


def _sol_path(tag: str) -> Path:
    kind, rest = tag.split(":", 1)
    return ADV / f"{rest}.py" if kind == "adv" else SOLUTIONS / rest


# ----------------------------------------------------------------------------- KernelBench-semantics judge

KB_JUDGE = r'''
import re, sys, json, types, torch
torch.set_num_threads(int(sys.argv[4]))
problem_path, solution_path, threads = sys.argv[1], sys.argv[2], sys.argv[3]
ref_src, sol_src = open(problem_path).read(), open(solution_path).read()

def strip(code):  # '#' and '//' comments, line by line
    out = []
    for line in code.split("\n"):
        for mark in ("#", "//"):
            if mark in line:
                line = line[:line.index(mark)]
        out.append(line)
    return "\n".join(out)

def strict_static(code):
    c = strip(code)
    if re.search(r"\btry\s*:|\bexcept\s*:|\bexcept\s+\w+", c): return "bypass: try/except"
    if re.search(r"\bpass\b", c): return "bypass: pass statement"
    if re.search(r"(time\.(perf_counter|time|monotonic)\w*|torch\.cuda\.(Event|synchronize)|elapsed_time)\s*=", c): return "timing monkey-patch"
    if re.search(r"\bimport\s+(threading|multiprocessing)|\bfrom\s+(threading|multiprocessing|concurrent)\b|\bThread\s*\(", c): return "threading"
    if re.search(r"_make_subclass|_make_wrapper_subclass|class\s+\w+\s*\(\s*torch\.Tensor\s*\)", c): return "lazy tensor subclass"
    return None

res = {"static": strict_static(sol_src), "correct": False, "error": None}
if res["static"] is None:
    try:
        ctx = {}
        exec(compile(ref_src, "ref", "exec"), ctx)            # reference and candidate share one process
        sys.modules["model"] = types.SimpleNamespace(Model=ctx["Model"])
        sol_ctx = {}
        exec(compile(sol_src, "sol", "exec"), sol_ctx)
        init = ctx["get_init_inputs"]()
        torch.manual_seed(42); ref = ctx["Model"](*init)          # weights by seeding, no .eval()
        torch.manual_seed(42); new = sol_ctx["ModelNew"](*init)
        try:
            new.load_state_dict(ref.state_dict())  # our solutions allocate params with torch.empty; KB relies on seeding
        except Exception:
            pass
        torch.manual_seed(42)
        seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
        ok = True
        with torch.no_grad():
            for s in seeds:
                torch.manual_seed(s)
                inputs = ctx["get_inputs"]()
                out = ref(*inputs)                                # reference first, same (uncloned) inputs
                new_out = new(*inputs)
                if out.shape != new_out.shape or not torch.allclose(out, new_out, atol=1e-4, rtol=1e-4):
                    ok = False
                    break
        res["correct"] = ok
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {str(e)[:200]}"
print("KBRESULT " + json.dumps(res))
'''


def kb_judge(problem: Path, solution: Path, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "kb_judge.py"
        script.write_text(KB_JUDGE)
        try:
            p = subprocess.run([sys.executable, str(script), str(problem), str(solution), str(threads), str(threads)],
                               capture_output=True, text=True, timeout=300, env=env, cwd=d)
        except subprocess.TimeoutExpired:
            return {"static": None, "correct": False, "error": "timeout"}
    m = re.search(r"^KBRESULT (.*)$", p.stdout, re.M)
    if not m:
        return {"static": None, "correct": False, "error": f"crashed (rc {p.returncode}): {p.stderr[-300:]}"}
    return json.loads(m.group(1))


# ----------------------------------------------------------------------------- sections

def bench_compile(tmp: Path, quick: bool) -> dict:
    from shiftkit.kernels.specs import extract_specs

    out = {}
    srcs = {"lean_c_abi": SOLUTIONS / "rowsum_scale" / "correct.py"}
    if not quick:
        srcs["torch_binding_load_inline"] = SOLUTIONS / "kb_l1_19_ReLU" / "correct_load_inline.py"
    for name, path in srcs.items():
        spec = extract_specs(path.read_text())[0][0]
        cache = tmp / f"cold_{name}"
        t = time.perf_counter()
        r1 = build(spec, cache)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        r2 = build(spec, cache)
        cached = time.perf_counter() - t
        out[name] = {"cold_s": round(cold, 3), "cached_s": round(cached, 4), "ok": r1.ok and r2.cached}
        # loading a cached artefact in a fresh worker process is measured by the eval throughput below
    return out


def bench_throughput() -> dict:
    t = time.perf_counter()
    n_ok = 0
    for p, s in CORRECT:
        n_ok += evaluate(PROBLEMS / f"{p}.py", SOLUTIONS / p / s, EvalConfig(profile=False)).correct
    dt = time.perf_counter() - t
    return {"verify_only_evals": len(CORRECT), "verify_only_correct": n_ok, "verify_only_seconds": round(dt, 2),
            "verify_only_evals_per_min": round(60 * len(CORRECT) / dt, 1)}


def bench_profiles(quick: bool) -> dict:
    rows = {}
    t = time.perf_counter()
    for p, s in CORRECT:
        r = evaluate(PROBLEMS / f"{p}.py", SOLUTIONS / p / s, EvalConfig(baseline_compile=not quick))
        rows[p] = {"correct": r.correct, "reward": r.reward, "speedup_eager": r.speedup_eager,
                   "speedup_compile": r.speedup_compile,
                   "timer": r.timings.get("candidate", {}).get("timer"),
                   "candidate_ms": r.timings.get("candidate", {}).get("median_ms"),
                   "candidate_iqr_ms": r.timings.get("candidate", {}).get("iqr_ms"),
                   "eager_ms": r.timings.get("eager", {}).get("median_ms"),
                   "compile_ms": r.timings.get("compile", {}).get("median_ms"), "reason": r.reason}
    first = time.perf_counter() - t
    t = time.perf_counter()
    for p, s in CORRECT:  # again, now with every baseline cached
        evaluate(PROBLEMS / f"{p}.py", SOLUTIONS / p / s, EvalConfig(baseline_compile=not quick))
    warm = time.perf_counter() - t
    faster = [p for p, r in rows.items() if r["correct"] and (r["speedup_eager"] or 0) > 1.05]
    return {"fixtures": rows, "faster_than_eager": faster,
            "full_profile_seconds_first_pass": round(first, 1),
            "full_profile_evals_per_min_warm": round(60 * len(CORRECT) / warm, 1)}


def bench_stability(n: int) -> dict:
    wall, cpu, speed = [], [], []
    for _ in range(n):
        r = evaluate(PROBLEMS / "fused_bias_relu_residual.py", SOLUTIONS / "fused_bias_relu_residual" / "correct.py",
                     EvalConfig(baseline_compile=False))
        wall.append(r.timings["candidate"]["wall_median_ms"])
        cpu.append(r.timings["candidate"]["cpu_median_ms"])
        speed.append(r.speedup_eager)
    return {"solution": "fused_bias_relu_residual/correct.py", "repeats": n, "timed_calls": 30,
            "wall_median_ms": wall, "cpu_median_ms": cpu, "speedup_eager": speed,
            "cv_of_median_wall": cv(wall), "cv_of_median_cpu": cv(cpu), "cv_of_speedup": cv(speed),
            "goal_cv": 0.03, "meets_goal_wall": cv(wall) < 0.03, "meets_goal_cpu": cv(cpu) < 0.03}


REWARD_CASES = [  # (label, problem, solution, kind, compile baseline): "near" = within ~10 % of a threshold
    ("scale_shift_clamp_vs_compile", "scale_shift_clamp", SOLUTIONS / "scale_shift_clamp" / "correct.py", "near", True),
    ("kb_l1_19_ReLU", "kb_l1_19_ReLU", SOLUTIONS / "kb_l1_19_ReLU" / "correct.py", "near", False),
    ("kb_l1_47_sum", "kb_l1_47_Sum_reduction_over_a_dimension", SOLUTIONS / "kb_l1_47_Sum_reduction_over_a_dimension" / "correct.py", "near", False),
    ("fused_bias_relu_residual", "fused_bias_relu_residual", SOLUTIONS / "fused_bias_relu_residual" / "correct.py", "clear", False),
    ("kb_l1_100_HingeLoss", "kb_l1_100_HingeLoss", SOLUTIONS / "kb_l1_100_HingeLoss" / "correct.py", "clear", False),
    ("kb_l1_1_matmul", "kb_l1_1_Square_matrix_multiplication", SOLUTIONS / "kb_l1_1_Square_matrix_multiplication" / "correct.py", "clear", False),
]


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return list(os.getloadavg())


def _sd(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5 if len(xs) > 1 else 0.0


def block_spread(runs: list[list[dict]], baseline: str) -> dict:
    """Between-block vs within-block noise of the block-level log ratios: the pooled (over evaluations) SD of
    one evaluation's block values, against the SD a block value would have from its own rounds alone
    (half-width of its 95 % order-statistic CI / 1.96, median over blocks)."""
    import math

    between, within = [], []
    for blocks in runs:
        v = [math.log(b[baseline]) for b in blocks if b.get(baseline)]
        if len(v) > 1:
            between.append(_sd(v) ** 2)
        within += [(math.log(b["ci"][baseline][1]) - math.log(b["ci"][baseline][0])) / (2 * 1.96) for b in blocks if b.get("ci")]
    return {"between_block_sd": (sum(between) / len(between)) ** 0.5 if between else None,
            "within_block_sd": statistics.median(within) if within else None}


def _rewards_summary(n: int, cfg0: EvalConfig, overrides: dict, rows: dict) -> dict:
    """The section's summary from the cases measured so far (a partial run is summarised the same way)."""
    done = [r for r in rows.values() if r["complete"]]
    clear = [r for r in done if r["kind"] == "clear"]
    near = [r for r in done if r["kind"] == "near"]
    all_loads = [x[0] for r in rows.values() for x in r["loadavg_before_each"]]
    cvs = [r["paired_ratio_cv"] for r in done if r["paired_ratio_cv"] is not None]
    return {
        "repeats": n, "overrides": overrides, "settings": {"baseline_compile": "only for the vs_compile case", "timed_calls": cfg0.timed_calls,
                                   "timing_blocks": cfg0.timing_blocks, "max_timed_calls": cfg0.max_timed_calls,
                                   "rounds_per_block": -(-cfg0.timed_calls // cfg0.timing_blocks),
                                   "respawn_blocks": cfg0.respawn_blocks, "pin_cpu": cfg0.pin_cpu,
                                   "interval": "Student-t over block medians of per-round log ratios", "estimator": "geometric mean of block medians",
                                   "ci_level": cfg0.ci_level, "margin": cfg0.margin, "warmup": cfg0.warmup,
                                   "timer": "auto (whole-tree CPU time, cgroup)"},
        "complete": len(done) == len([c for c in REWARD_CASES]) and all(r["complete"] for r in rows.values()),
        "cases_done": [k for k, r in rows.items() if r["complete"]],
        "load_1min": {"min": min(all_loads), "median": statistics.median(all_loads), "max": max(all_loads),
                      "note": "/proc/loadavg before each evaluation (per case: loadavg_before_each, loadavg_after_each); "
                              "other jobs share the 2 vCPUs"} if all_loads else None,
        "cases": rows,
        "reward_flip_rate": {"clear_max": max((r["flip_rate"] for r in clear), default=None),
                             "near_max": max((r["flip_rate"] for r in near), default=None),
                             "per_case": {k: v["flip_rate"] for k, v in rows.items() if v["complete"]},
                             "goal": "0 for the clear cases, <= 0.10 with inconclusive reported for the near cases"},
        "paired_ratio_cv": {"max": max(cvs, default=None), "median": statistics.median(cvs) if cvs else None,
                            "per_case": {k: v["paired_ratio_cv"] for k, v in rows.items() if v["complete"]}, "goal": 0.03},
    }


def bench_rewards(n: int, overrides: dict | None = None, cases: set | None = None, on_progress=None) -> dict:
    """Repeated full evaluations (paired vs eager, default sampling budget): reward flips and ratio CV.
    ``overrides``: EvalConfig fields for every evaluation (e.g. the single-block design for a comparison).
    ``on_progress(summary)``: called after every evaluation with the summary so far (the caller writes it)."""
    import math
    from collections import Counter

    overrides = overrides or {}
    cfg0 = EvalConfig(**overrides)
    rows = {}
    for label, prob, sol, kind, with_compile in REWARD_CASES:
        if cases and label not in cases:
            continue
        rewards, speed, incon, rounds, secs, reasons, blocks, cis, loads, loads_after = [], [], [], [], [], [], [], [], [], []
        base = "compile" if with_compile else "eager"
        for i in range(n):
            loads.append(_loadavg())
            t0 = time.perf_counter()
            r = evaluate(PROBLEMS / f"{prob}.py", sol, EvalConfig(**{**overrides, "baseline_compile": with_compile}))
            secs.append(time.perf_counter() - t0)
            loads_after.append(_loadavg())
            rewards.append(r.reward)
            speed.append(r.speedup_compile if with_compile else r.speedup_eager)
            incon.append(r.inconclusive)
            rounds.append(r.paired.get("rounds"))
            reasons.append(r.reason[:160])
            blocks.append(r.paired.get("blocks", []))
            cis.append(r.paired.get(base, {}).get("ci"))
            mode = Counter(rewards).most_common(1)[0][0]
            flips = sum(1 for x in rewards if x != mode) / len(rewards)
            ok = [x for x in speed if x]
            med_blocks = [math.exp(statistics.median([math.log(b[base]) for b in bl])) for bl in blocks if bl]
            rows[label] = {"kind": kind, "baseline": base, "complete": i + 1 == n, "evaluations": i + 1,
                           "rewards": rewards, "mode": mode, "flip_rate": flips,
                           "inconclusive": sum(incon), "speedup": speed, "paired_ratio_cv": cv(ok) if len(ok) > 1 else None,
                           "speedup_spread": {"min": min(ok), "median": statistics.median(ok), "max": max(ok)} if ok else None,
                           "ci": cis, "rounds": rounds, "n_blocks": [len(b) for b in blocks],
                           "block_speedups": [[b[base] for b in bl] for bl in blocks], "block_cpus": [[b.get("cpus", b.get("cpu")) for b in bl] for bl in blocks],
                           "median_of_blocks_cv": cv(med_blocks) if len(med_blocks) > 1 else None,
                           **block_spread(blocks, base),
                           "reasons": reasons, "seconds_per_eval": statistics.median(secs), "seconds": secs,
                           "loadavg_before_each": loads, "loadavg_after_each": loads_after}
            print(f"    {label} eval {i + 1}/{n}: reward {r.reward:+.0f} speedup {speed[-1] or float('nan'):.3f} "
                  f"{secs[-1]:.0f} s load {loads[-1][0]:.1f}-{loads_after[-1][0]:.1f}", flush=True)
            if on_progress:
                on_progress(_rewards_summary(n, cfg0, overrides, rows))
        row = rows[label]
        print(f"  {label:28s} {kind:5s} rewards {rewards} flip {row['flip_rate']:.2f} inconclusive {sum(incon)} "
              f"cv {row['paired_ratio_cv'] or float('nan'):.3f} rounds {rounds} s/eval {row['seconds_per_eval']:.1f} load {loads[-1]}", flush=True)
    return _rewards_summary(n, cfg0, overrides, rows)


def bench_suite() -> dict:
    """Issue #17: every fixture of tests/adversarial/test_hacks.py (families of hacks, false-positive classes)
    evaluated once: caught / passed, the finding, seconds (the catch rate on our own suite)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_hacks", REPO / "tests" / "adversarial" / "test_hacks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = []
    for fam, sol, prob, codes, over in mod.CASES:
        t0 = time.perf_counter()
        try:
            r = evaluate(mod._prob(prob), load_solution(mod.SOL / sol if (mod.SOL / sol).is_dir() else mod.SOL / f"{sol}.py"),
                         EvalConfig(**({"profile": False} | mod.BUDGET | over)))
            row = {"family": fam, "fixture": sol, "caught": not r.correct and r.reward == -1.0,
                   "right_finding": bool(set(codes) & set(r.codes())), "codes": r.codes(None), "reward": r.reward}
        except Exception as e:  # noqa: BLE001 - reported, never hidden
            row = {"family": fam, "fixture": sol, "caught": False, "right_finding": False, "error": f"{type(e).__name__}: {e}"}
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"  {fam[:28]:28s} {sol:28s} caught={row['caught']} right={row['right_finding']} {row.get('codes')}", flush=True)
    honest = []
    for sol, prob in mod.HONEST:
        r = evaluate(mod._prob(prob), load_solution(mod.HON / sol), EvalConfig(profile=False))
        honest.append({"fixture": sol, "passed": r.correct, "codes": r.codes(None), "reward": r.reward})
        print(f"  honest {sol:28s} passed={r.correct} {r.codes(None)}", flush=True)
    return {"hacks": rows, "honest": honest,
            "catch_rate": sum(r["caught"] for r in rows) / len(rows),
            "right_finding_rate": sum(r["right_finding"] for r in rows) / len(rows),
            "honest_pass_rate": sum(h["passed"] for h in honest) / len(honest),
            "note": "profile-only fixtures run with the test's short paired window (eager baseline, 10 rounds)",
            "command": "PYTHONPATH=. .venv/bin/python benchmarks/bench_kernel_eval.py --sections suite"}


def bench_diagnose(n: int = 3) -> dict:
    """Is the run-to-run spread a process effect? ``scale_shift_clamp`` vs eager and torch.compile in 6 blocks of
    10 rounds, every block reusing the same three workers (``respawn_blocks=False``): the between-block spread
    there is the time/load effect alone; compare with the fresh-worker blocks of the ``rewards`` section."""
    runs, loads, secs = [], [], []
    for _ in range(n):
        loads.append(_loadavg())
        t0 = time.perf_counter()
        r = evaluate(PROBLEMS / "scale_shift_clamp.py", SOLUTIONS / "scale_shift_clamp" / "correct.py",
                     EvalConfig(timing_blocks=6, timed_calls=60, max_timed_calls=60, respawn_blocks=False))
        secs.append(time.perf_counter() - t0)
        runs.append(r.paired.get("blocks", []))
    return {"respawn_blocks": False, "blocks": 6, "rounds_per_block": 10, "evaluations": n, "loadavg_before_each": loads,
            "seconds": secs, "block_speedups": {b: [[x[b] for x in bl] for bl in runs] for b in ("eager", "compile")},
            "eager": block_spread(runs, "eager"), "compile": block_spread(runs, "compile")}


def bench_sandbox(n: int = 5, rounds: int = 200) -> dict:
    """Cost of the design: a worker from the zygote (spawn, sandbox, load, close) and the fixed cost of one
    round (request, views, a trivial forward on 16 floats, the output copy, the reply, thaw and freeze) in
    on-CPU and wall time: the same for every party, it compresses speedups towards 1."""
    from shiftkit.kernels import sandbox, shm, wire

    prob = load_problem(REPO / "tests" / "kernels" / "problems" / "tiny_add.py")
    setup = {"mode": "reference", "backend": "cpu", "device": "cpu", "threads": 1, "builds": [], "isolate": True,
             "cpu_s": 300, "max_output_bytes": 100_000, "env": sandbox.base_env({"OMP_NUM_THREADS": "1"})}
    blob = wire.dumps_tensors({"init": [], "state": {}})

    def start():
        w = sandbox.Worker(setup, {"problem.py": str(prob.path)}, 4096, time.monotonic() + 300, None, 64, 0, tempfile.gettempdir())
        w.load(blob)
        return w

    start().close()  # the zygote is up
    ws = []
    for _ in range(n):
        t0 = time.perf_counter()
        start().close()
        ws.append(time.perf_counter() - t0)
    w = start()
    x = prob.inputs(1)
    il, _ = shm.layout(list(x))
    ol, _ = shm.layout(x[0] + 1.0)
    cpu, wall = [], []
    for _ in range(rounds):
        rr = w.round(list(x), il, ol)
        cpu.append(rr.cpu_ns / 1e3)
        wall.append(rr.wall_ns / 1e3)
    w.close()
    return {"worker_start_load_close_s": statistics.median(ws), "n": n, "round_fixed_cost_cpu_us": {
        "median": statistics.median(cpu), "min": min(cpu)}, "round_fixed_cost_wall_us": {"median": statistics.median(wall),
                                                                                          "min": min(wall)},
            "rounds": rounds, "load_1min": _loadavg()[0]}


def bench_side_by_side() -> list[dict]:
    rows = []
    for tag, prob, kind in SIDE_BY_SIDE:
        sol = _sol_path(tag)
        timing_only = "timing_only" in tag  # only the re-check of timed outputs can see it: profile that one
        ours = evaluate(load_problem(PROBLEMS / f"{prob}.py"), load_solution(sol),
                        EvalConfig(profile=timing_only, baseline_compile=False, threads=2 if "race" in tag else 1))
        kb = kb_judge(PROBLEMS / f"{prob}.py", sol, 2 if "race" in tag else 1)
        kb_accepts = kb["static"] is None and kb["correct"]
        rows.append({"solution": tag.split(":", 1)[1], "problem": prob, "kind": kind,
                     "ours_accepts": ours.correct, "ours_findings": ours.codes(),
                     "kb_accepts": kb_accepts, "kb_static": kb["static"], "kb_error": kb["error"],
                     "ours_right": ours.correct == (kind == "correct"), "kb_right": kb_accepts == (kind == "correct")})
        print(f"  {rows[-1]['solution']:58s} {kind:7s} ours={'accept' if ours.correct else 'reject':6s} "
              f"kb={'accept' if kb_accepts else 'reject':6s} {ours.codes()} {kb['static'] or kb['error'] or ''}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the torch-binding cold build and compile baselines")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "kernel_eval.json"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--cases", default="", help="comma list of reward-case labels (rewards, rewards_single_block)")
    ap.add_argument("--sections", default="compile,throughput,profiles,stability,rewards,side",
                    help="comma list; results merge into an existing --out file")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    import torch

    out_path = Path(args.out)
    res = json.loads(out_path.read_text()) if out_path.is_file() and sections != {"compile", "throughput", "profiles", "stability", "rewards", "side"} else {}
    if res and res.get("design") != "issue17":  # measured on the design before issue #17: kept apart, not mixed in
        res = {"before_issue17": {k: v for k, v in res.items() if k != "machine"} | {"machine": res.get("machine")},
               "rewards_issue10": res.get("rewards")}
    res["design"] = "issue17"
    res.setdefault("machine", {}).update({"cpu_count": os.cpu_count(), "torch": torch.__version__,
                                          f"load_avg_start_{'+'.join(sorted(sections))}": os.getloadavg()})
    res["settings"] = {"threads": 1, "trials": 5, "timed_calls": 30, "warmup": 3, "llc_flush": True}
    from benchmarks.common import commit, command

    for sec in sections:  # the file merges runs: each section keeps the commit and command that measured it
        res.setdefault("section_runs", {})[sec] = {"commit": commit(), "command": command()}
    res.update({"command": command(), "commit": commit(), "peer": None,
                "peer_note": "reward stability (flip rate, paired-ratio CV) is a property of this environment alone; "
                             "the side_by_side section scores the same fixtures with KernelBench's harness semantics"})
    res.setdefault("matched", {}).update({"threads": 1, "note": "candidate and baselines of every case share inputs, "
                                          "threads, warm-up, LLC flushes and CPU pinning per block"})

    def save() -> None:  # atomically, after every section and every reward evaluation: a killed run keeps its rows
        res["machine"]["load_avg_end"] = os.getloadavg()
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1, default=str) + "\n")
        os.replace(tmp, out_path)
    if "compile" in sections:
        with tempfile.TemporaryDirectory() as tmp:
            print("compile cold vs cached ...", flush=True)
            res["compile"] = bench_compile(Path(tmp), args.quick)
            print(json.dumps(res["compile"]), flush=True)
    if "throughput" in sections:
        print("warm-cache throughput ...", flush=True)
        res["throughput"] = bench_throughput()
        print(json.dumps(res["throughput"]), flush=True)
    if "profiles" in sections:
        print("profiles of the correct fixtures ...", flush=True)
        res["profiles"] = bench_profiles(args.quick)
        print(json.dumps({k: v for k, v in res["profiles"].items() if k != "fixtures"}), flush=True)
        for p, r in res["profiles"]["fixtures"].items():
            print(f"  {p:42s} eager {r['speedup_eager'] or 0:6.2f}x  compile {r['speedup_compile'] or 0:6.2f}x  reward {r['reward']:+.0f}")
    if "stability" in sections:
        print("timing stability ...", flush=True)
        res["stability"] = bench_stability(args.repeats)
        print(json.dumps({k: v for k, v in res["stability"].items() if not isinstance(v, list)}), flush=True)
    if "suite" in sections:
        print("issue #17 suite: hack families and false-positive classes ...", flush=True)
        res["suite"] = bench_suite()
        print(json.dumps({k: v for k, v in res["suite"].items() if k not in ("hacks", "honest")}), flush=True)
    if "sandbox" in sections:
        res["sandbox"] = bench_sandbox()
        print(json.dumps(res["sandbox"]), flush=True)
    if "diagnose" in sections:
        print("block spread with reused workers ...", flush=True)
        res["rewards_diagnose"] = bench_diagnose()
        print(json.dumps({k: res["rewards_diagnose"][k] for k in ("eager", "compile", "seconds")}), flush=True)
    if "rewards_single_block" in sections:  # the design before the blocks, at today's load, for the comparison
        print("reward stability, single-block design ...", flush=True)
        res["rewards_single_block"] = bench_rewards(args.repeats, {"timing_blocks": 1, "pin_cpu": False},
                                                    set(args.cases.split(",")) if args.cases else None)
        res["rewards_single_block"]["note"] = ("single-block design (one worker set, 30 rounds, order-statistic interval over rounds; unlike the "
                                               "pre-block code it is not extended while straddling), rerun with the current code at today's load; "
                                               "the inductor cache fix and the every-output recheck are in both")
    if "rewards" in sections:
        print("reward stability (paired timing) ...", flush=True)
        prev = res.get("rewards")
        if prev and "timing_blocks" not in prev.get("settings", {}):
            res["rewards_before_blocks"] = prev  # the single-block design, kept for the before/after comparison
        elif prev and prev.get("design") != "issue17":
            res["rewards_issue10"] = prev  # the design before issue #17 (forkserver, untimed prepare), for the comparison
        def progress(summary: dict) -> None:
            res["rewards"] = summary | {"design": "issue17", "partial": True}
            save()

        res["rewards"] = bench_rewards(args.repeats, cases=set(args.cases.split(",")) if args.cases else None,
                                       on_progress=progress)
        res.pop("rewards_partial", None)  # the earlier run's printed line: superseded by the rows written here
        res["rewards"]["design"] = "issue17"
        res["rewards"]["load_1min_during"] = res["rewards"]["load_1min"]
        before = res.get("rewards_issue10", {}).get("cases", {})
        res["rewards"]["wall_time_vs_issue10"] = {
            k: {"seconds_per_eval": v["seconds_per_eval"], "issue10_seconds_per_eval": before.get(k, {}).get("seconds_per_eval")}
            for k, v in res["rewards"]["cases"].items()}
        st = res["rewards"]["settings"]
        res["rewards"]["matched"] = {
            "note": "every case's candidate and its baselines run with the same settings: threads 1, same inputs, LLC flushes, "
                    "warm-up, CPU pinning per block; candidate and baselines re-spawned together in every block",
            **{k: st[k] for k in ("timed_calls", "timing_blocks", "rounds_per_block", "max_timed_calls", "pin_cpu", "warmup", "ci_level")},
            "threads": 1, "dtype": "fp32 (the problems' own dtypes)", "repeats": args.repeats,
            "command": "PYTHONPATH=. .venv/bin/python benchmarks/bench_kernel_eval.py --sections rewards"}
        res.setdefault("matched", {}).update({k: st[k] for k in ("timed_calls", "timing_blocks", "rounds_per_block", "max_timed_calls", "pin_cpu")})
        res["reward_flip_rate"] = res["rewards"]["reward_flip_rate"]
        res["paired_ratio_cv"] = res["rewards"]["paired_ratio_cv"]
        print(json.dumps({"reward_flip_rate": res["reward_flip_rate"], "paired_ratio_cv": res["paired_ratio_cv"]}), flush=True)
    if "side" not in sections:
        save()
        print(f"wrote {args.out}")
        return
    print("side by side with KernelBench's harness semantics ...", flush=True)
    rows = bench_side_by_side()
    res["side_by_side"] = rows
    res["side_by_side_summary"] = {
        "hacks_and_wrong": sum(1 for r in rows if r["kind"] != "correct"),
        "ours_rejects": sum(1 for r in rows if r["kind"] != "correct" and not r["ours_accepts"]),
        "kb_rejects": sum(1 for r in rows if r["kind"] != "correct" and not r["kb_accepts"]),
        "correct": sum(1 for r in rows if r["kind"] == "correct"),
        "ours_false_positives": sum(1 for r in rows if r["kind"] == "correct" and not r["ours_accepts"]),
        "kb_false_positives": sum(1 for r in rows if r["kind"] == "correct" and not r["kb_accepts"]),
    }
    res["machine"]["load_avg_end"] = os.getloadavg()
    print(json.dumps(res["side_by_side_summary"]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
