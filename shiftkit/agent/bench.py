"""``shiftkit agent bench``: run the agent over a problem set and report the paper's metrics (pass rate,
faster-than-eager, faster-than-compile, geomean speedups; overall and per KernelBench level).

``--model`` is an OpenAI-compatible base URL (``http://host:port/v1``), a local HF model directory
(in-process), or ``scripted`` (the scripted oracle policy writing known solutions from ``--solutions``;
it measures the harness, not a model).
"""

from __future__ import annotations

import re
from pathlib import Path

from shiftkit.agent.episode import AgentConfig, run_episode
from shiftkit.errors import ShiftkitError


def make_client(spec: str, problem_name: str, solutions: str | None = None, temperature: float = 0.0):
    from shiftkit.agent.clients import HFClient, OpenAIClient

    if spec.startswith(("http://", "https://")):
        return OpenAIClient(spec, temperature=temperature)
    if spec == "scripted":
        from shiftkit.agent.scripted import kernel_fix_script, known_solution_files

        return kernel_fix_script(known_solution_files(problem_name, solutions))
    if Path(spec).is_dir():
        return HFClient.from_pretrained(spec, temperature=temperature)
    raise ShiftkitError(f"--model must be an http(s) URL, a model directory or 'scripted', got {spec!r}")


def level_of(name: str) -> str:
    m = re.match(r"kb_l(\d)_", name)
    return f"level{m.group(1)}" if m else "other"


def run_bench(model: str, problems: str, cfg: AgentConfig, out: str, solutions: str | None = None) -> dict:
    from shiftkit.io import atomic_write_json
    from shiftkit.kernels.metrics import set_metrics

    files = sorted(p for p in Path(problems).glob("*.py") if p.name != "__init__.py")
    if not files:
        raise ShiftkitError(f"no problem files (*.py) in {problems}")
    Path(out).mkdir(parents=True, exist_ok=True)
    results = []
    for f in files:
        res = run_episode(f, make_client(model, f.stem, solutions), cfg, Path(out) / f"{f.stem}.jsonl")
        fe = res.get("final_eval") or {}
        results.append({"problem": f.stem, "level": level_of(f.stem), "outcome": res["outcome"], "reward": res["final_reward"],
                        "correct": bool(fe.get("correct")), "speedup_eager": fe.get("speedup_eager"),
                        "speedup_compile": fe.get("speedup_compile"), "turns": res["counts"]["turns"],
                        "malformed": res["counts"]["malformed"], "seconds": res["timings"]["total_s"]})
    scored = [r for r in results if r["reward"] is not None]  # unscorable: the environment could not judge it
    levels = sorted({r["level"] for r in scored})
    summary = {"model": model, "problems": problems, "n": len(scored), "overall": set_metrics(scored, 0.05),
               "per_level": {lv: set_metrics([r for r in scored if r["level"] == lv], 0.05) for lv in levels},
               "unscorable": [r["problem"] for r in results if r["reward"] is None], "results": results}
    atomic_write_json(Path(out) / "bench.json", summary)
    return summary
