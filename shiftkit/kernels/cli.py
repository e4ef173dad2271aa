"""``shiftkit kernels ...``: eval, eval-set, import-kernelbench (the agent's commands: ``shiftkit agent``)."""

from __future__ import annotations

import argparse
from pathlib import Path



def _add_config_args(p: argparse.ArgumentParser) -> None:
    from shiftkit.cli import add_config_args

    add_config_args(p)


def _config(args, **cli):
    from shiftkit.config import load_config
    from shiftkit.kernels.evaluate import EvalConfig

    base = {k: v for k, v in cli.items() if v is not None}
    return load_config(EvalConfig, args.config, args.overrides, base=base)


def cmd_eval(args) -> dict:
    from shiftkit.kernels.evaluate import evaluate

    cfg = _config(args, backend=args.backend)
    r = evaluate(args.problem, args.solution, cfg)
    d = r.to_dict()
    if not args.json:
        print(f"compiled: {r.compiled}\ncorrect:  {r.correct}\nreward:   {r.reward:+g}\nreason:   {r.reason}")
        for f in r.findings:
            print(f"finding:  [{f.severity}] {f.code}: {f.message}" + (f" ({f.where})" if f.where else ""))
        for e in r.compile_errors:
            print(f"compile:  {e.file}:{e.line}: {e.message}")
        for k, t in r.timings.items():
            print(f"timing:   {k:9s} median {t['median_ms']:.3f} ms  IQR {t['iqr_ms']:.3f} ms  (n={t['n']})")
        if r.speedup_eager is not None:
            sc = "-" if r.speedup_compile is None else f"{r.speedup_compile:.2f}x"
            print(f"speedup:  vs eager {r.speedup_eager:.2f}x, vs compile {sc}")
    for k in d.get("timings", {}).values():
        k.pop("times_ms", None)
    d.pop("builds", None)
    return d


def cmd_eval_set(args) -> dict:
    from shiftkit.kernels.evalset import pair_up, run_pool, summary_table
    from shiftkit.kernels.metrics import set_metrics

    cfg = _config(args, backend=args.backend)
    pairs = pair_up(args.problems, args.solutions)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = run_pool(pairs, cfg, args.workers, out, use_ray=args.ray, ray_address=args.ray_address,
                       progress=not args.no_progress)
    table = summary_table(results)
    (out.with_suffix(".summary.txt")).write_text(table + "\n")
    if not args.json:
        print(table)
        print(f"\nwrote {out} and {out.with_suffix('.summary.txt')}")
    return {"n": len(results), "jsonl": str(out), "metrics": set_metrics(results, cfg.margin)}


def cmd_import(args) -> dict:
    from dataclasses import asdict

    from shiftkit.kernels.kernelbench import import_kernelbench

    only = [s.strip() for s in args.only.split(",")] if args.only else None
    recs = import_kernelbench(args.dir, args.level, args.out, scale=args.scale, only=only,
                              keep_degenerate=args.keep_degenerate, min_ms=args.min_ms, max_ms=args.max_ms)
    if not args.json:
        for r in recs:
            status = "imported" if r.out else "skipped "
            ms = f"{r.ref_ms:.1f} ms" if r.ref_ms else "-"
            print(f"{status} {Path(r.source).name:48s} {ms:>9s}  {r.reason}  {r.scaled_sizes}")
    return {"imported": sum(1 for r in recs if r.out), "skipped": sum(1 for r in recs if not r.out),
            "records": [asdict(r) for r in recs]}


def register_eval(ksub) -> None:
    p = ksub.add_parser("eval", help="evaluate one solution: compile, verify, profile, reward")
    p.add_argument("--problem", required=True, help="KernelBench-format problem file")
    p.add_argument("--solution", required=True, help="solution .py file or workspace directory")
    p.add_argument("--backend", choices=["cpu", "cuda"], default=None)
    _add_config_args(p)
    p.set_defaults(func=cmd_eval)


def register_eval_set(ksub) -> None:
    p = ksub.add_parser("eval-set", help="evaluate many solutions in a process pool (or on Ray)")
    p.add_argument("--problems", required=True, help="directory of problem files")
    p.add_argument("--solutions", required=True, help="directory: <problem>.py or <problem>/<solution>")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="runs/kernels/eval_set.jsonl", help="JSONL output (+ .summary.txt)")
    p.add_argument("--backend", choices=["cpu", "cuda"], default=None)
    p.add_argument("--ray", action="store_true", help="run the pool on Ray (optional extra)")
    p.add_argument("--ray-address", default=None, help="existing Ray cluster address (default: start a local one)")
    p.add_argument("--no-progress", action="store_true")
    _add_config_args(p)
    p.set_defaults(func=cmd_eval_set)


def register_import(ksub) -> None:
    p = ksub.add_parser("import-kernelbench", help="convert KernelBench problem files into our problem set")
    p.add_argument("dir", help="KernelBench checkout (or a levelN directory)")
    p.add_argument("--level", type=int, required=True)
    p.add_argument("--scale", choices=["cpu", "none"], default="none")
    p.add_argument("--out", default="runs/kernels/problems")
    p.add_argument("--only", default=None, help="comma-separated problem numbers or stems")
    p.add_argument("--keep-degenerate", action="store_true")
    p.add_argument("--min-ms", type=float, default=1.0)
    p.add_argument("--max-ms", type=float, default=100.0)
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.set_defaults(func=cmd_import)


def register(sub) -> None:
    p = sub.add_parser("kernels", help="kernel environment: evaluate candidate kernels (compile, verify, profile)")
    ksub = p.add_subparsers(dest="kernels_command", metavar="KERNELS_COMMAND")
    for fn in (register_eval, register_eval_set, register_import):
        fn(ksub)
