"""``shiftkit kernels ...``: eval, eval-set, import-kernelbench (the agent's commands: ``shiftkit agent``)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.evaluate import EvalConfig

# Every input of a kernels command is a config field (settable by --config and key=value); the
# flags below are aliases. Job fields sit beside the evaluation's own EvalConfig fields, flat.


@dataclasses.dataclass
class EvalJob(EvalConfig):
    problem: str = ""  # KernelBench-format problem file
    solution: str = ""  # solution .py file or workspace directory

    def validate(self) -> None:
        super().validate()
        if not self.problem or not self.solution:
            raise ShiftkitError("kernels eval needs problem=FILE and solution=FILE|DIR (or --problem/--solution)")


@dataclasses.dataclass
class EvalSetJob(EvalConfig):
    problems: str = ""  # directory of problem files
    solutions: str = ""  # directory: <problem>.py or <problem>/<solution>
    workers: int = 2  # worker processes of the pool
    out: str = "runs/kernels/eval_set.jsonl"  # JSONL output (+ .summary.txt)
    ray: bool = False  # run the pool on Ray (optional extra)
    ray_address: str = ""  # existing Ray cluster address ("" = start a local one)
    progress: bool = True  # progress bar (log lines when stderr is not a terminal)

    def validate(self) -> None:
        super().validate()
        if not self.problems or not self.solutions:
            raise ShiftkitError("kernels eval-set needs problems=DIR and solutions=DIR (or --problems/--solutions)")
        if self.workers < 1:
            raise ShiftkitError(f"kernels eval-set: workers must be >= 1, got {self.workers}")


@dataclasses.dataclass
class ImportJob:
    source: str = ""  # KernelBench checkout (or a levelN directory)
    level: int = 0  # KernelBench level (1, 2, 3)
    scale: str = "none"  # cpu (shrink sizes to run on a CPU) | none
    out: str = "runs/kernels/problems"  # output directory of problem files
    only: list[str] = dataclasses.field(default_factory=list)  # problem numbers or stems to import (empty = all)
    keep_degenerate: bool = False  # keep problems whose output is (near) constant
    min_ms: float = 1.0  # drop problems whose eager time is below this (after scaling)
    max_ms: float = 100.0  # drop problems whose eager time is above this

    def validate(self) -> None:
        if not self.source or self.level <= 0:
            raise ShiftkitError("kernels import-kernelbench needs source=DIR and level=N (or DIR --level N)")
        if self.scale not in ("cpu", "none"):
            raise ShiftkitError(f"kernels import-kernelbench: scale must be cpu or none, got {self.scale!r}")


def _eval_config(job) -> EvalConfig:
    """The evaluation's own config out of a job config (the job fields stay with the command)."""
    return EvalConfig(**{f.name: getattr(job, f.name) for f in dataclasses.fields(EvalConfig)})


def _add_config_args(p: argparse.ArgumentParser, aliases: dict[str, str], **flag_kw) -> None:
    from shiftkit.cliargs import add_config_args

    add_config_args(p, aliases, **flag_kw)


def cmd_eval(args) -> dict:
    from shiftkit.cliargs import config_from_args
    from shiftkit.kernels.evaluate import evaluate

    job = config_from_args(EvalJob, args)
    r = evaluate(job.problem, job.solution, _eval_config(job))
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

    from shiftkit.cliargs import config_from_args

    job = config_from_args(EvalSetJob, args)
    cfg = _eval_config(job)
    pairs = pair_up(job.problems, job.solutions)
    out = Path(job.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if job.ray:
        results = run_pool(pairs, cfg, job.workers, out, use_ray=True, ray_address=job.ray_address or None,
                           progress=job.progress)
    else:  # the one evaluation pool, shared with `kernels serve` and the kernel reward (issue 18)
        from shiftkit.kernels.pool import EvalPool

        with EvalPool(job.workers, cfg, queue_max=len(pairs)) as pool:
            results = pool.run_pairs(pairs, cfg, out, progress=job.progress)
    table = summary_table(results)
    (out.with_suffix(".summary.txt")).write_text(table + "\n")
    if not args.json:
        print(table)
        print(f"\nwrote {out} and {out.with_suffix('.summary.txt')}")
    return {"n": len(results), "jsonl": str(out), "metrics": set_metrics(results, cfg.margin)}


def cmd_import(args) -> dict:
    from dataclasses import asdict

    from shiftkit.cliargs import config_from_args
    from shiftkit.kernels.kernelbench import import_kernelbench

    pos = getattr(args, "source_pos", None)
    if pos and "=" in pos:  # no DIR given: the first key=value landed in the positional slot
        args.overrides = [pos, *(args.overrides or [])]
        pos = None
    job = config_from_args(ImportJob, args, base={"source": pos} if pos else None)
    only = [str(x).strip() for x in job.only] or None
    recs = import_kernelbench(job.source, job.level, job.out, scale=job.scale, only=only,
                              keep_degenerate=job.keep_degenerate, min_ms=job.min_ms, max_ms=job.max_ms)
    if not args.json:
        for r in recs:
            status = "imported" if r.out else "skipped "
            ms = f"{r.ref_ms:.1f} ms" if r.ref_ms else "-"
            print(f"{status} {Path(r.source).name:48s} {ms:>9s}  {r.reason}  {r.scaled_sizes}")
    return {"imported": sum(1 for r in recs if r.out), "skipped": sum(1 for r in recs if not r.out),
            "records": [asdict(r) for r in recs]}


def register_eval(ksub) -> None:
    p = ksub.add_parser("eval", help="evaluate one solution: compile, verify, profile, reward")
    _add_config_args(p, {"--problem": "problem", "--solution": "solution", "--backend": "backend"},
                     config="shiftkit.kernels.cli:EvalJob", backend={"choices": ["cpu", "cuda"]})
    p.set_defaults(func=cmd_eval)


def register_eval_set(ksub) -> None:
    p = ksub.add_parser("eval-set", help="evaluate many solutions in a process pool (or on Ray)")
    _add_config_args(p, {"--problems": "problems", "--solutions": "solutions", "--workers": "workers",
                         "--out": "out", "--backend": "backend", "--ray-address": "ray_address"},
                     config="shiftkit.kernels.cli:EvalSetJob", backend={"choices": ["cpu", "cuda"]})
    p.add_argument("--ray", dest="alias:ray", action="store_const", const="true", default=None,
                   help="alias of ray=true")
    p.add_argument("--no-progress", dest="alias:progress", action="store_const", const="false", default=None,
                   help="alias of progress=false")
    p.set_defaults(func=cmd_eval_set)


def register_import(ksub) -> None:
    p = ksub.add_parser("import-kernelbench", help="convert KernelBench problem files into our problem set")
    p.add_argument("source_pos", nargs="?", metavar="DIR", default=None,
                   help="KernelBench checkout or levelN directory (alias of source=DIR)")
    _add_config_args(p, {"--level": "level", "--scale": "scale", "--out": "out", "--only": "only",
                         "--min-ms": "min_ms", "--max-ms": "max_ms"}, config="shiftkit.kernels.cli:ImportJob")
    p.add_argument("--keep-degenerate", dest="alias:keep_degenerate", action="store_const", const="true",
                   default=None, help="alias of keep_degenerate=true")
    p.set_defaults(func=cmd_import)


def register(sub) -> None:
    p = sub.add_parser("kernels", help="kernel environment: evaluate candidate kernels (compile, verify, profile)")
    ksub = p.add_subparsers(dest="kernels_command", metavar="KERNELS_COMMAND")
    for fn in (register_eval, register_eval_set, register_import):
        fn(ksub)
    from shiftkit.kernels.service import register_cli as register_service  # serve, dataset (issue 18)

    register_service(ksub)
