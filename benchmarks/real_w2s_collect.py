"""Copy a ``shiftkit experiment real-w2s`` run into ``benchmarks/results/`` with its provenance.

A finished run (``out/results.json`` covering the asked ``seeds``) is copied as it is, with ``commit`` (the tree
the experiment ran on, given by ``--commit``: the run's code, not this script's), ``peer: None`` and
``peer_note`` added; its ``report.md`` and ``real_w2s.png`` are copied next to it.

A run stopped before the end (the recipe writes ``results.json`` only when every seed is done) is
assembled from its cache instead: every finished evaluation (``out/eval/*.json``, only those whose cache key
matches the run's settings), the stage times, the anatomy and SAR sweep files. The file then says
``"partial": true`` and lists under ``missing`` every model and stage that did not finish; the summary and
the verdicts are the recipe's own (:func:`shiftkit.recipes.real_w2s.summarize` / ``claims``) on what did
finish, so a claim whose arm is missing has no verdict at all.

    python benchmarks/real_w2s_collect.py --commit 079a52b out=/work/runs/real_w2s 'seeds=[0]' ...

takes the experiment's own ``key=value`` overrides (the same list, so the same config, eval settings and
command line).

Seeds run in different invocations (one per stop of a shared box) are merged with ``--merge FILE`` (the
committed results of the earlier seeds): the two runs must have the same config except ``seeds``/``workers``,
disjoint seeds, and the shared stages must agree: the student's and the weak base's held-out evaluations,
which the later run recomputes from scratch (the weak base is retrained by its heal SFT), within
:data:`SHARED_RULE` (one held-out problem per rate; sampling on another CPU flips single samples). A larger
difference is an error naming the metric: seeds trained from another weak base are not merged. The
differences are kept in ``shared_stage_check``; the earlier run's evaluations of the shared stages are used.
The merged file keeps each seed's commit under ``commits`` and recomputes the summary, verdicts, report and plot.

    python benchmarks/real_w2s_collect.py --commit a9fb608 --merge benchmarks/results/real_w2s.json \
        out=/work/runs/real_w2s student=/work/models/smollm2 'seeds=[1]' threads=1 workers=1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shiftkit.recipes import real_w2s as R  # noqa: E402

PEER_NOTE = "no peer: arms compared with each other on the same student, prompts and held-out evaluation"


def expected(cfg: R.RealW2SConfig, seeds: list[int]) -> dict[int, list[str]]:
    """The models each seed makes, in the recipe's order."""
    names = ["weak_rl", *cfg.arms, *R.SAR_ARMS]
    names += [*R.EXPERTS, *R.MERGES] if cfg.merge else []
    return {s: names for s in seeds}


def partial(cfg: R.RealW2SConfig, command: str, wall_seconds: float | None) -> dict:
    out, seeds = Path(cfg.out), cfg.seeds
    data = {"test": str(out / "data" / "test.jsonl")}
    settings = R.eval_settings(cfg, data)

    def cached(name: str) -> dict | None:
        p = out / "eval" / f"{name}.json"
        if not p.exists():
            return None
        c = json.loads(p.read_text())
        if {k: v for k, v in c["key"].items() if k != "model"} != settings:
            raise SystemExit(f"{p}: evaluated under other settings than the run's; not collected")
        return c["result"]

    evals: dict = {}
    for name in ("student", "weak"):
        if (r := cached(name)) is not None:
            evals[name] = {0: r}
    missing: dict = {}
    for s, names in expected(cfg, seeds).items():
        for name in names:
            r = cached(f"{name}_seed{s}")
            if r is None:
                missing.setdefault(f"seed{s}", []).append(name)
            else:
                evals.setdefault(name, {})[s] = r
    if cfg.anatomy_control and not (out / "anatomy" / "control.json").exists():
        missing["control"] = ["anatomy_control (the contrast pair: pruned, not healed, before/after GRPO)"]
    order = ["student", "weak", "weak_rl", *R.ARMS, *R.SAR_ARMS, *R.EXPERTS, *R.MERGES]
    evals = {n: evals[n] for n in order if evals.get(n)}
    times: dict = {}
    for f in sorted(out.glob("stages*.json")):
        times.update(json.loads(f.read_text()))
    anatomy = {s: json.loads(p.read_text())["result"] for s in seeds
               if (p := out / "anatomy" / f"seed{s}.json").exists()}
    control = None
    if (p := out / "anatomy" / "control.json").exists():
        control = {"anatomy": json.loads(p.read_text())["result"], "training": R.rl_curve(out / "control_rl")}
    sar = {}
    for s in seeds:
        if (p := out / "sar" / f"seed{s}" / "sweep.json").exists():
            rows = json.loads(p.read_text())["ranks"]
            sar[s] = {n: {"delta_rank": r["delta_rank"], "param_fraction": r["param_fraction"]}
                      for n, r in zip(R.SAR_ARMS, rows)}
    fmt = None
    if "student" in evals and "weak" in evals:
        s, w = R.format_stats(evals["student"][0]), R.format_stats(evals["weak"][0])
        fmt = {"student": s, "weak": w, "format_tol": cfg.format_tol, "length_tol": cfg.length_tol}
    walls = json.loads((out / "wall.json").read_text()) if (out / "wall.json").exists() else []
    return {"experiment": "real-w2s", "partial": True, "missing": missing,
            "partial_note": "the run was stopped before every stage finished (a deadline on a shared 2-core box); "
                            "this file holds every evaluation that finished, the verdicts only for claims whose "
                            "both sides finished", "command": command, "config": R.to_dict(cfg),
            "matched": R.matched(cfg, data), "evals": evals, "summary": R.summarize(evals) if evals else {},
            "verdicts": R.claims(cfg, evals) if "student" in evals else [], "format": fmt, "anatomy": anatomy,
            "anatomy_control": control, "sar": sar, "stage_seconds": times,
            "stage_seconds_sum": round(sum(R._secs(v) for v in times.values()), 1),
            "stage_cpu_seconds_sum": round(sum(R._secs(v, "cpu") for v in times.values() if isinstance(v, dict)), 1),
            "cpu_seconds_per_seed": {s: round(sum(R._secs(v, "cpu") for k, v in times.items()
                                                  if k.endswith(f"/seed{s}") and isinstance(v, dict)), 1) for s in seeds},
            "wall_seconds": wall_seconds if wall_seconds is not None else round(sum(w["seconds"] for w in walls), 1),
            "invocations": walls,
            "machine": {"cpus": os.cpu_count(), "threads": cfg.threads, "workers": cfg.workers, **R.cpu_facts(),
                        "loadavg_collected": os.getloadavg(),
                        "note": "a shared 2-core box; other jobs ran alongside at normal priority, the run at nice 10"}}


SHARED = ("student", "weak")  # one model each, evaluated by every invocation: must agree exactly
PER_SEED = ("anatomy", "sar", "skipped", "cpu_seconds_per_seed")
FREE_KEYS = {"seeds", "workers"}  # what may differ between the merged invocations


SHARED_RULE = ("every rate metric of the student and the weak base (accuracies, pass@k, truncation) within one "
               "held-out problem (1/eval_n, below what any verdict resolves), every length within 5%; standard "
               "errors are derived and eval_seconds is a clock. Sampling on another CPU can flip single samples "
               "(autocast bf16 kernels differ across CPUs), so exact equality is not required")


def shared_difference(a: dict, b: dict, eval_n: int, name: str) -> dict:
    """The shared stage ``name``'s two evaluations, compared by :data:`SHARED_RULE`; returns the differences,
    exits naming the first metric outside the rule."""
    diffs: dict = {}
    for m in sorted(set(a) | set(b)):
        if m == "eval_seconds" or m.endswith("_se"):
            continue
        if m not in a or m not in b:
            raise SystemExit(f"merge: the shared stage {name!r} has {m!r} in only one run; merge runs of one recipe")
        d = float(b[m]) - float(a[m])
        diffs[m] = d
        length = "length" in m
        ok = abs(d) <= 0.05 * max(abs(float(a[m])), 1e-9) if length else abs(d) <= 1.0 / eval_n + 1e-12
        if not ok:
            raise SystemExit(f"merge: the shared stage {name!r} evaluates differently in the two runs ({m}: {a[m]} vs "
                             f"{b[m]}, beyond {'5%' if length else f'1/eval_n = {1 / eval_n:g}'}): its seeds did not "
                             "start from the same models; rerun every seed in one place")
    return {"max_abs_rate_difference": max((abs(v) for k, v in diffs.items() if "length" not in k), default=0.0),
            "differences": {k: v for k, v in diffs.items() if v != 0}}


def _int_keys(d: dict) -> dict:
    return {int(k): v for k, v in d.items()}


def _seeds_cfg(cfg: R.RealW2SConfig, res: dict) -> R.RealW2SConfig:
    return R.RealW2SConfig(**{**R.to_dict(cfg), "seeds": res["config"]["seeds"]})


def merge(cfg: R.RealW2SConfig, old: dict, new: dict) -> dict:
    """``old`` (earlier seeds, committed) and ``new`` (this run) as one result: the config must match but for
    :data:`FREE_KEYS`, the seeds must be disjoint, and the shared stages' evaluations identical (see the module
    docstring). Per-seed parts are unioned; the summary and the verdicts are the recipe's own on the union."""
    if old.get("partial") or new.get("partial"):
        raise SystemExit("merge: both runs must be complete (a partial run's missing stages would go unnoticed); "
                         f"partial: old={old.get('partial')}, new={new.get('partial')}")
    co, cn = old["config"], new["config"]
    diff = sorted(k for k in set(co) | set(cn) if k not in FREE_KEYS and co.get(k) != cn.get(k))
    if diff:
        raise SystemExit(f"merge: the runs' configs differ in {diff} (e.g. {diff[0]}: {co.get(diff[0])!r} vs "
                         f"{cn.get(diff[0])!r}); merge only runs of one config")
    so, sn = sorted(co["seeds"]), sorted(cn["seeds"])
    if set(so) & set(sn):
        raise SystemExit(f"merge: seeds {sorted(set(so) & set(sn))} are in both runs; merge disjoint seeds")
    check = {name: shared_difference(old["evals"][name]["0"], new["evals"][name]["0"], cfg.eval_n, name)
             for name in SHARED}
    seeds = sorted(so + sn)
    evals: dict = {}
    for name in [*old["evals"], *(n for n in new["evals"] if n not in old["evals"])]:
        if name in SHARED:
            evals[name] = {0: old["evals"][name]["0"]}
        else:
            evals[name] = {**_int_keys(old["evals"].get(name, {})), **_int_keys(new["evals"].get(name, {}))}
            evals[name] = dict(sorted(evals[name].items()))
    mcfg = R.RealW2SConfig(**{**R.to_dict(cfg), "seeds": seeds})
    models = {n: (p if n in SHARED else {**old["models"].get(n, {}), **new["models"].get(n, {})})
              for n, p in {**old["models"], **new["models"]}.items()}
    times = {**old["stage_seconds"], **{k: v for k, v in new["stage_seconds"].items() if "/seed" in k}}
    old_commits = old.get("commits") or {str(s): old["commit"] for s in so}
    res = {**new, "commit": new["commit"], "commits": {**old_commits, **{str(s): new["commit"] for s in sn}},
           "commit_note": {"earlier seeds": old.get("commit_note"), "merge": (
               f"seeds {so} from the committed results, seeds {sn} run at {new['commit']}; the shared stages "
               f"({', '.join(SHARED)}) were recomputed by the later run and agree within shared_stage_check's rule; "
               "the earlier run's evaluations of them are kept")},
           "config": R.to_dict(mcfg), "models": models, "evals": evals, "summary": R.summarize(evals),
           "verdicts": R.claims(mcfg, evals), "stage_seconds": times,
           "stage_seconds_sum": round(sum(R._secs(v) for v in times.values()), 1),
           "stage_cpu_seconds_sum": round(sum(R._secs(v, "cpu") for v in times.values() if isinstance(v, dict)), 1),
           "wall_seconds": round(old["wall_seconds"] + new["wall_seconds"], 1),
           "invocations": [*old.get("invocations", []), *new.get("invocations", [])],
           "machine": {"earlier seeds": old["machine"], "later seeds": new["machine"]},
           "shared_stage_check": {"rule": SHARED_RULE, **check}}
    for k in PER_SEED:
        res[k] = {**old.get(k, {}), **{str(s): v for s, v in new.get(k, {}).items()}}
    res["anatomy_control"] = old.get("anatomy_control") or new.get("anatomy_control")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", required=True, help="the commit the experiment ran on")
    ap.add_argument("--wall-seconds", type=float, help="a stopped run's wall time, start to stop (its log)")
    ap.add_argument("--dest", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--merge", help="committed results of earlier seeds (real_w2s.json) to merge this run into")
    ap.add_argument("overrides", nargs="*", help="the experiment's key=value overrides")
    a = ap.parse_args()
    cfg = R.load_config(R.RealW2SConfig, None, a.overrides)
    out, dest = Path(cfg.out), Path(a.dest)
    res_file = out / "results.json"
    full = res_file.exists() and json.loads(res_file.read_text())["config"]["seeds"] == cfg.seeds
    res = json.loads(res_file.read_text()) if full else partial(cfg, R._command(None, a.overrides), a.wall_seconds)
    res = {"commit": a.commit, "peer": None, "peer_note": PEER_NOTE, "partial": not full, **res}
    if full:
        for src, name in (("report.md", "real_w2s_report.md"), ("real_w2s.png", "real_w2s.png")):
            shutil.copyfile(out / src, dest / name)
    else:
        for name in ("real_w2s_report.md", "real_w2s.png"):  # the old run's report and plot are not this run's
            (dest / name).unlink(missing_ok=True)
        if res["summary"]:
            R.plot(cfg, res["summary"], dest / "real_w2s.png")
        if res["format"]:  # the recipe's report on what finished, under a line that says it is partial
            lines = R.report_lines(cfg, res)
            lines[1:1] = ["", f"**Partial**: the run was stopped before these finished: {json.dumps(res['missing'])}."]
            (dest / "real_w2s_report.md").write_text("\n".join(lines) + "\n")
    if a.merge:
        res = merge(cfg, json.loads(Path(a.merge).read_text()), res)
        for name in ("real_w2s_report.md", "real_w2s.png"):
            (dest / name).unlink(missing_ok=True)
        R.plot(_seeds_cfg(cfg, res), res["summary"], dest / "real_w2s.png")
        (dest / "real_w2s_report.md").write_text("\n".join(R.report_lines(_seeds_cfg(cfg, res), res)) + "\n")
    R.atomic_write_json(dest / "real_w2s.json", res)
    print(f"{'full' if full else 'partial'}: {dest / 'real_w2s.json'}; missing: {res.get('missing', {})}")


if __name__ == "__main__":
    main()
