"""Issue 18's results file from a finished ``shiftkit experiment agent-kernels`` run.

    python benchmarks/agent_kernels_report.py --run /work/runs/agent_kernels

Reads ``RUN/results.json`` (and its plot) as the experiment wrote them and writes
``benchmarks/results/agent_kernel_rl.json`` and ``.png``: the command, the seeds, the held-out mean reward
before and after per pipeline (``reward_before`` / ``reward_after``), the before/after table, and the verdict by
the rule the small runs use (every seed up and the mean change above twice the sample sd of the changes).
Nothing is measured here; every number comes from the run's own file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from shiftkit.io import atomic_write_json  # noqa: E402
from shiftkit.recipes.agent_kernels import learning_verdict as verdict  # noqa: E402

STAGES = {"single_turn": ("before", "after"), "multi_turn": ("before", "after_rft", "after")}
ROW_KEYS = ("reward", "frac_-1", "frac_+1", "frac_+2", "frac_+3", "malformed", "finished", "turns", "verify_calls")


def report(run: dict) -> dict:
    per = run["per_seed"]
    seeds = list(per)
    table, before, after, verdicts = {}, {}, {}, {}
    for pipe, stages in STAGES.items():
        table[pipe] = {st: {s: {k: per[s][pipe][st].get(k) for k in ROW_KEYS if k in per[s][pipe][st]} for s in seeds}
                       for st in stages}
        before[pipe] = run[pipe]["reward_before"]
        after[pipe] = run[pipe]["reward_after"]
        b = [per[s][pipe]["before"]["reward"] for s in seeds]
        verdicts[pipe] = {"before -> after": verdict(b, [per[s][pipe]["after"]["reward"] for s in seeds])}
        if pipe == "multi_turn":
            r = [per[s][pipe]["after_rft"]["reward"] for s in seeds]
            verdicts[pipe]["before -> after_rft"] = verdict(b, r)
            verdicts[pipe]["after_rft -> after (value pretraining + PPO)"] = verdict(r, [per[s][pipe]["after"]["reward"] for s in seeds])
    return {"command": run["command"], "commit": run["commit"], "seeds": [int(s) for s in seeds],
            "what": "issue 18: the kernel grammar policy (0.23M) trained by the real environment's profile-mode reward "
                    "(-1/+1/+2/+3), single-turn (SFT -> GRPO) and multi-turn (BC -> RFT -> value pretraining + PPO), "
                    "held-out problems; every (problem, composition) profiled once and its verdict reused",
            "problems": run["problems"], "reward_before": before, "reward_after": after,
            "reward_after_rft": run["multi_turn"]["reward_after_rft"], "verdicts": verdicts, "table": table,
            "oracle": {k: v for k, v in run["oracle"].items() if k != "table"}, "oracle_table": run["oracle"]["table"],
            "train_curves": {s: {p: per[s][p]["train_curve"] for p in STAGES} for s in seeds},
            "config": run["config"], "env": run["env"], "seconds": run["seconds"],
            "peer": None, "peer_note": "a learning measurement, not a timing comparison: no peer trains on the kernel grammar",
            "matched": {"before_vs_after": "same held-out prompts, sample seeds, temperature 1, max_new_tokens 32, "
                                           "reward (one cached verdict per composition)",
                        "eval_samples_per_heldout_problem": run["config"]["eval_samples"]},
            "report_command": "python benchmarks/agent_kernels_report.py --run " + run["config"]["out"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="the experiment's out= directory")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "agent_kernel_rl.json"))
    a = ap.parse_args()
    src = Path(a.run) / "results.json"
    if not src.is_file():
        raise SystemExit(f"agent_kernels_report: {src} is missing; run `shiftkit experiment agent-kernels out={a.run}` first")
    res = report(json.loads(src.read_text()))
    atomic_write_json(Path(a.out), res)
    png = Path(a.run) / "agent_kernel_rl.png"
    if png.is_file():
        shutil.copyfile(png, Path(a.out).with_suffix(".png"))
    for pipe, v in res["verdicts"].items():
        for k, x in v.items():
            print(f"{pipe} {k}: changes {[round(c, 2) for c in x['changes']]} mean {x['mean_change']:+.2f} "
                  f"sd {x['sd_change']:.2f}: {x['verdict']}")


if __name__ == "__main__":
    main()
