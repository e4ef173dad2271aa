"""benchmarks/real_w2s_collect.py --merge: seeds run in separate invocations become one result only when the
configs match, the seeds are disjoint and the shared stages (student, weak base) evaluate identically; the
verdicts are then the recipe's own on every seed. Hand-made results, no model."""

import importlib.util
import json
from pathlib import Path

import pytest

from shiftkit.recipes import real_w2s as R

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("real_w2s_collect", ROOT / "benchmarks" / "real_w2s_collect.py")
collect = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(collect)

K = 4
PER_SEED = ["weak_rl", *R.ARMS, *R.SAR_ARMS, *R.EXPERTS, *R.MERGES]


def _metrics(avg: float) -> dict:
    return {f"avg@{K}": avg, f"avg@{K}_se": 0.01, "greedy_acc": avg, f"pass@{K}": min(1.0, avg + 0.2),
            "pass@1": avg, "pass@2": min(1.0, avg + 0.1), "eval_seconds": 3.0}


def _run(seeds: list[int], base: dict, commit: str) -> dict:
    """One complete invocation's results: the shared stages at ``base``, every per-seed model at +0.3 over the
    student (+ a per-seed wobble of 0.01)."""
    cfg = R.RealW2SConfig(seeds=seeds)
    evals = {"student": {"0": _metrics(base["student"])}, "weak": {"0": _metrics(base["weak"])}}
    for n in PER_SEED:
        evals[n] = {str(s): _metrics(base["student"] + 0.3 + 0.01 * s) for s in seeds}
    return {"commit": commit, "partial": False, "config": R.to_dict(cfg), "evals": evals,
            "models": {"student": "s", "weak": "w", **{n: {str(s): f"{n}{s}" for s in seeds} for n in PER_SEED}},
            "stage_seconds": {"eval/student": 1.0, **{f"weak_rl/seed{s}": 2.0 for s in seeds}},
            "wall_seconds": 10.0, "invocations": [{"seconds": 10.0, "seeds": seeds}], "machine": {"cpus": 2},
            "anatomy": {str(s): {"eos_share": 0.1} for s in seeds}, "sar": {str(s): {} for s in seeds},
            "skipped": {}, "cpu_seconds_per_seed": {str(s): 5.0 for s in seeds}, "anatomy_control": {"x": 1}}


BASE = {"student": 0.4, "weak": 0.2}


def test_merge_unions_seeds_and_resolves_what_one_seed_could_not():
    old, new = _run([0], BASE, "aaa"), _run([1, 2], BASE, "bbb")
    one = {c["claim"]: c["verdict"] for c in R.claims(R.RealW2SConfig(seeds=[0]), {
        n: {int(s): r for s, r in v.items()} for n, v in old["evals"].items()})}
    assert one["Direct-OPD improves the student"] == "not resolved (one seed)"
    m = collect.merge(R.RealW2SConfig(seeds=[1, 2]), json.loads(json.dumps(old)), json.loads(json.dumps(new)))
    assert m["config"]["seeds"] == [0, 1, 2] and m["commits"] == {"0": "aaa", "1": "bbb", "2": "bbb"}
    assert sorted(m["evals"]["direct_opd"]) == [0, 1, 2] and list(m["evals"]["student"]) == [0]
    assert m["summary"]["direct_opd"]["seeds"] == [0, 1, 2]
    assert m["summary"]["direct_opd"][f"avg@{K}"]["mean"] == pytest.approx(0.71)  # 0.7, 0.71, 0.72
    v = {c["claim"]: c for c in m["verdicts"]}
    assert v["Direct-OPD improves the student"]["verdict"] == "holds" and v["Direct-OPD improves the student"]["seeds"] == [3, 1]
    assert set(m["anatomy"]) == {"0", "1", "2"} and m["wall_seconds"] == 20.0
    assert m["models"]["grpo"] == {"0": "grpo0", "1": "grpo1", "2": "grpo2"}
    # the merged file is itself mergeable (a third invocation): its commits carry over
    m3 = collect.merge(R.RealW2SConfig(seeds=[3]), json.loads(json.dumps(m)), _run([3], BASE, "ccc"))
    assert m3["commits"] == {"0": "aaa", "1": "bbb", "2": "bbb", "3": "ccc"} and m3["config"]["seeds"] == [0, 1, 2, 3]


@pytest.mark.parametrize("change, msg", [
    (lambda o, n: n["evals"]["weak"]["0"].__setitem__("greedy_acc", 0.21), "'weak' evaluates differently"),
    (lambda o, n: n["evals"]["weak"]["0"].__setitem__("greedy_acc", 0.2 + 0.0051), "'weak' evaluates differently"),
    (lambda o, n: n["evals"]["student"]["0"].__setitem__(f"pass@{K}", 0.5), "'student' evaluates differently"),
    (lambda o, n: n["config"].__setitem__("lr", 1e-4), "configs differ in ['lr']"),
    (lambda o, n: n["config"].__setitem__("seeds", [0, 1]), "seeds [0] are in both runs"),
    (lambda o, n: n.__setitem__("partial", True), "both runs must be complete"),
])
def test_merge_refuses_runs_that_are_not_one_experiment(change, msg):
    old, new = _run([0], BASE, "aaa"), _run([1], BASE, "bbb")
    change(old, new)
    with pytest.raises(SystemExit, match=msg.replace("[", r"\[").replace("]", r"\]")):
        collect.merge(R.RealW2SConfig(seeds=[1]), old, new)


def test_merge_tolerates_a_flipped_sample_and_records_it():
    """Measured: the student's evaluation on another CPU differed by one sample in 800 (avg@4 0.24125 vs 0.24).
    Below one held-out problem (1/eval_n) a shared stage merges; the difference is recorded, the earlier kept."""
    old, new = _run([0], BASE, "aaa"), _run([1], BASE, "bbb")
    new["evals"]["student"]["0"]["eval_seconds"] = 99.0  # a loaded box: slower
    new["evals"]["student"]["0"][f"avg@{K}"] = BASE["student"] - 1 / 800
    new["evals"]["student"]["0"][f"avg@{K}_se"] = 0.0123  # derived: not compared
    m = collect.merge(R.RealW2SConfig(seeds=[1]), old, new)
    assert m["evals"]["student"][0]["eval_seconds"] == 3.0 and m["evals"]["student"][0][f"avg@{K}"] == BASE["student"]
    chk = m["shared_stage_check"]["student"]
    assert chk["max_abs_rate_difference"] == pytest.approx(1 / 800) and list(chk["differences"]) == [f"avg@{K}"]
    assert m["shared_stage_check"]["weak"] == {"max_abs_rate_difference": 0.0, "differences": {}}
