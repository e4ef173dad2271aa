"""Build many solutions ahead of evaluation, in parallel (KernelBench-style CPU precompile)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from shiftkit.kernels.build import BuildResult, build
from shiftkit.kernels.solution import load_solution


def prebuild(solutions: list[str | Path], cache_dir: str | Path | None = None, workers: int = 2,
             jobs: int = 1, backend: str = "cpu") -> list[BuildResult]:
    """Build every spec of every solution (content-hash cache; identical sources build once)."""
    specs = {}
    for s in solutions:
        for spec in load_solution(s, backend).specs:
            specs[spec.key()] = spec
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        return list(ex.map(lambda sp: build(sp, cache_dir, 600.0, jobs), specs.values()))


def prebuild_in_background(solutions: list[str | Path], cache_dir: str | Path | None = None) -> Future:
    """Start :func:`prebuild` on a daemon thread (ninja runs as a subprocess, so it overlaps other work)."""
    fut: Future = Future()

    def run() -> None:
        try:
            fut.set_result(prebuild(solutions, cache_dir, workers=1))
        except BaseException as e:  # noqa: BLE001
            fut.set_exception(e)

    threading.Thread(target=run, daemon=True, name="kernels-prebuild").start()
    return fut
