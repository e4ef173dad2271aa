"""Evaluate many (problem, solution) pairs: a local process pool or the same pool on a Ray cluster."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.evaluate import EvalConfig, evaluate
from shiftkit.kernels.metrics import set_metrics


def pair_up(problems_dir: str | Path, solutions_dir: str | Path) -> list[tuple[str, str]]:
    """Pairs (problem file, solution): ``solutions/<stem>.py``, ``solutions/<stem>/*.py`` and
    ``solutions/<stem>/<workspace dir>/`` for every ``problems/<stem>.py``."""
    pd, sd = Path(problems_dir), Path(solutions_dir)
    if not pd.is_dir():
        raise ShiftkitError(f"problems directory not found: {pd}")
    if not sd.is_dir():
        raise ShiftkitError(f"solutions directory not found: {sd}")
    pairs = []
    for p in sorted(pd.glob("*.py")):
        if p.name.startswith("_"):
            continue
        if (sd / f"{p.stem}.py").is_file():
            pairs.append((str(p), str(sd / f"{p.stem}.py")))
        d = sd / p.stem
        if d.is_dir():
            for s in sorted(d.iterdir()):
                if (s.suffix == ".py" and not s.name.startswith("_")) or (s.is_dir() and (s / "model_new.py").is_file()):
                    pairs.append((str(p), str(s)))
    if not pairs:
        raise ShiftkitError(f"no (problem, solution) pairs: expected {sd}/<problem>.py or {sd}/<problem>/*.py")
    return pairs


def _eval_one(problem: str, solution: str, cfg_dict: dict) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        r = evaluate(problem, solution, EvalConfig(**cfg_dict))
        d = r.to_dict()
    except Exception as e:  # noqa: BLE001 - one broken pair must not stop the set
        d = {"problem": Path(problem).stem, "solution": solution, "compiled": False, "correct": False, "findings": [],
             "timings": {}, "speedup_eager": None, "speedup_compile": None, "reward": -1.0,
             "reason": f"harness error: {type(e).__name__}: {e}", "compile_errors": []}
    d.pop("builds", None)
    for k in ("candidate", "eager", "compile"):
        if k in d.get("timings", {}):
            d["timings"][k].pop("times_ms", None)
    return d


def run_pool(pairs: list[tuple[str, str]], config: EvalConfig, workers: int, out_path: str | Path | None,
             use_ray: bool = False, ray_address: str | None = None, progress: bool = True,
             on_result: Callable[[dict], None] | None = None) -> list[dict]:
    cfg = dataclasses.asdict(config)
    results: list[dict] = []
    out = open(out_path, "w") if out_path else None  # noqa: SIM115
    try:
        from tqdm import tqdm

        bar = tqdm(total=len(pairs), disable=not progress, desc="kernels eval-set", unit="eval")

        def emit(d: dict) -> None:
            results.append(d)
            if out:
                out.write(json.dumps(d, default=str) + "\n")
                out.flush()
            if on_result:
                on_result(d)
            bar.update(1)

        if use_ray:
            try:
                import ray
            except ImportError:
                raise ShiftkitError("--ray needs the optional 'ray' package (pip install ray)") from None
            started = not ray.is_initialized()
            if started:
                ray.init(address=ray_address, num_cpus=None if ray_address else workers, include_dashboard=False,
                         log_to_driver=False, ignore_reinit_error=True)
            try:
                remote = ray.remote(num_cpus=1)(_eval_one)
                pending = [remote.remote(p, s, cfg) for p, s in pairs]
                while pending:
                    done, pending = ray.wait(pending, num_returns=1)
                    emit(ray.get(done[0]))
            finally:
                if started:
                    ray.shutdown()
        elif workers <= 1:
            for p, s in pairs:
                emit(_eval_one(p, s, cfg))
        else:
            import multiprocessing as mp

            with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
                futs = [ex.submit(_eval_one, p, s, cfg) for p, s in pairs]
                for f in as_completed(futs):
                    emit(f.result())
        bar.close()
    finally:
        if out:
            out.close()
    order = {(str(Path(p).stem), s): i for i, (p, s) in enumerate(pairs)}
    results.sort(key=lambda d: order.get((d["problem"], d["solution"]), 1 << 30))
    return results


def summary_table(results: list[dict]) -> str:
    def f(x, fmt="{:.2f}x"):
        return "-" if x is None else fmt.format(x)

    rows = [("problem", "solution", "ok", "vs eager", "vs compile", "reward", "reason")]
    for d in results:
        rows.append((d["problem"][:34], Path(d["solution"]).name[:24], "yes" if d["correct"] else "no",
                     f(d.get("speedup_eager")), f(d.get("speedup_compile")), f"{d['reward']:+.2f}", d["reason"][:60]))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    m = set_metrics(results)
    lines.append("")
    lines.append("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in m.items()))
    return "\n".join(lines)
