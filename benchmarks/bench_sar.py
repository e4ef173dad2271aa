"""SAR extract on a Qwen3-1.7B-shaped pair, all 28 layers: shiftkit vs shiftkit's transcription of the
official algorithm, interleaved matrix by matrix in one process.

Synthetic checkpoint pair with Qwen3-1.7B shapes (hidden 2048, intermediate 6144, 16 q / 8 kv heads of 128,
vocab 151936, tied embeddings), stored in bf16 as RL checkpoints are. ``--delta``:

* ``flat`` (default, RL-like): dW = 1e-3 * iid Gaussian (5% of W0's entry scale): a Marchenko-Pastur
  spectrum with no gap at k, the worst case for the randomized solver (it runs all its iterations, no
  early stop). Real RL deltas are measured in ``bench_sar_realistic.py``.
* ``lowrank`` (the earlier benchmark): rank-64 delta with singular values 0.9^i plus 2e-5 noise; the
  randomized solver stops after 2 iterations there.

Timing (``--threads`` threads, default 1, ``OMP_WAIT_POLICY=PASSIVE``): for every one of the 7 x 28 target
matrices the driver reads W0 and W1 (bf16) once and runs, in alternating order, (a) ``official_sar_delta``
(shiftkit's transcription of the official ``svd_rewire_parallel.py``: two full fp32 SVDs per matrix) and
(b) ``sar_edit_matrix`` with the default options (``solver=auto``: randomized for min(m, n) > 256), and on
every ``--exact-every``-th layer also (c) ``solver=exact``. Per matrix it records CPU seconds
(``time.process_time``: with one thread, robust to other jobs on a shared machine) and wall seconds, the
relative difference ||edit - official|| / ||official|| and the energy ratio (kept rank-k energy / optimal
rank-k energy, the latter from the exact solver where it ran). Load (bf16 read + fp32 cast of both tensors)
is timed separately and is the same for both sides. The official script also holds both models in fp32
(2 x 6.8 GB here); this driver streams one matrix at a time instead (not part of the timed work).
``--layer-range A:B`` times one shard of layers (several shards may run side by side, each one thread);
``--assemble`` combines shard files; ``--extract-only`` times the whole ``shiftkit sar extract`` process
(core + edited checkpoint; wall, CPU seconds of the child, peak RSS) and ``--extract-result`` adds it to
the assembled file. ``--stop-at HH:MM`` stops a shard after its current layer.

The committed ``sar_bench.json`` (all 28 layers; on a 2-core VM shared with four other agents, load
average 10-15, hence CPU seconds) came from::

    B="--layers 28 --threads 1 --workdir /tmp/h1/sar28 --keep --out /tmp/h1/sar_bench.json"
    export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
    for r in 0:4 4:6 6:8 8:10 10:15 15:17 17:19 19:24 24:26 26:28; do   # 10 shards, side by side
        .venv/bin/python benchmarks/bench_sar.py $B --layer-range $r --skip-extract & done; wait
    .venv/bin/python benchmarks/bench_sar.py $B --extract-only
    .venv/bin/python benchmarks/bench_sar.py $B --assemble /tmp/h1/sar_bench.layers*.json \
        --extract-result /tmp/h1/sar_bench.extract.json --out benchmarks/results/sar_bench.json

(shards 0:4, 10:15 and 19:24 were started as 0:10, 10:19 and 19:28 and stopped after their last layer
when the other shards were added; the shard files record the layers each ran). One process for everything:

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_sar.py --layers 28 --threads 1

``--merge`` additionally times ``shiftkit sar merge --method ties`` and mergekit's TIES (results in
``sar_merge_bench.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shiftkit.sar import linalg as la  # noqa: E402
from shiftkit.sar.checkpoint import CheckpointReader, ShardedWriter  # noqa: E402

H, I, NQ, NKV, HD, V, L_FULL = 2048, 6144, 16, 8, 128, 151936, 28


def layer_shapes(i: int):
    p = f"model.layers.{i}."
    return [(p + "input_layernorm.weight", (H,)), (p + "self_attn.q_proj.weight", (NQ * HD, H)),
            (p + "self_attn.k_proj.weight", (NKV * HD, H)), (p + "self_attn.v_proj.weight", (NKV * HD, H)),
            (p + "self_attn.o_proj.weight", (H, NQ * HD)), (p + "self_attn.q_norm.weight", (HD,)),
            (p + "self_attn.k_norm.weight", (HD,)), (p + "post_attention_layernorm.weight", (H,)),
            (p + "mlp.gate_proj.weight", (I, H)), (p + "mlp.up_proj.weight", (I, H)), (p + "mlp.down_proj.weight", (H, I))]


def plan(layers: int):
    return [("model.embed_tokens.weight", (V, H))] + [x for i in range(layers) for x in layer_shapes(i)] + \
        [("model.norm.weight", (H,))]


def build_pair(root: Path, layers: int, delta: str, seed: int = 0):
    from transformers import Qwen3Config

    cfg = Qwen3Config(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=layers,
                      num_attention_heads=NQ, num_key_value_heads=NKV, head_dim=HD, tie_word_embeddings=True,
                      max_position_embeddings=4096)
    g = torch.Generator().manual_seed(seed)
    entries = plan(layers)
    wb = ShardedWriter(root / "base", [(n, torch.bfloat16, s) for n, s in entries], 2 << 30)
    wt = ShardedWriter(root / "tuned", [(n, torch.bfloat16, s) for n, s in entries], 2 << 30)
    for name, shape in entries:
        if len(shape) == 1:
            W0 = torch.ones(shape)
            W1 = W0
        else:
            W0 = 0.02 * torch.randn(shape, generator=g)
            W1 = W0
            if "proj" in name and delta == "lowrank":
                m, n = shape
                r = 64  # low rank with a decaying spectrum (0.9^i) plus noise
                U, _ = torch.linalg.qr(torch.randn(m, r, generator=g))
                Vt, _ = torch.linalg.qr(torch.randn(n, r, generator=g))
                W1 = W0 + (U * (0.9 ** torch.arange(r))) @ Vt.T + 2e-5 * torch.randn(shape, generator=g)
            elif "proj" in name:  # flat: iid Gaussian delta, no spectral gap anywhere
                W1 = W0 + 1e-3 * torch.randn(shape, generator=g)
        wb.write(name, W0.to(torch.bfloat16))
        wt.write(name, W1.to(torch.bfloat16))
    wb.close()
    wt.close()
    for d in ("base", "tuned"):
        cfg.save_pretrained(root / d)


TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def summarize(xs: list[float]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def interleaved(work: Path, layers: range, exact_every: int, stop_at: str, partial: Path) -> dict:
    """Per-matrix side-by-side timing and fidelity on ``layers`` (see the module docstring); rows are
    written to ``partial`` after every layer."""
    from shiftkit.sar.edit import EditOptions, sar_edit_matrix
    from shiftkit.sar.linalg import RankSpec
    from shiftkit.sar.reference import official_sar_delta

    rb, rt = CheckpointReader(work / "base"), CheckpointReader(work / "tuned")
    spec = RankSpec("fraction", 0.01)
    variants = {"default": EditOptions(delta_rank=spec), "exact": EditOptions(delta_rank=spec, solver="exact")}
    rows: dict[str, dict] = {}
    done: list[int] = []
    t_all = time.time()
    for li in layers:
        if stop_at and time.strftime("%H:%M") >= stop_at:
            break
        for t in TARGETS:
            name = next(n for n in rb.names if n.startswith(f"model.layers.{li}.") and f".{t}." in n)
            s = time.perf_counter()
            W0, W1 = rb.get(name).float(), rt.get(name).float()
            row = {"load_s": time.perf_counter() - s, "shape": list(W0.shape)}
            run = ["official", "default"] + (["exact"] if exact_every and li % exact_every == 0 else [])
            if (li * len(TARGETS) + TARGETS.index(t)) % 2:
                run = run[::-1]
            out = {}
            for v in run:
                s, c = time.perf_counter(), time.process_time()
                if v == "official":
                    out[v] = official_sar_delta(W0, W1, spec)
                else:
                    out[v] = sar_edit_matrix(W0, W1, variants[v])
                row[f"{v}_s"] = time.perf_counter() - s
                row[f"{v}_cpu_s"] = time.process_time() - c
            D = out["official"]
            for v in run:
                if v == "official":
                    continue
                e = out[v]
                row[f"{v}_rel_diff"] = la.rel_err(e.B_mq @ e.A_qn, D)
                row[f"{v}_energy_lowrank"] = e.stats["energy_lowrank"]
                row["k"] = e.stats["k"]
            if "exact" in out:
                row["default_energy_ratio"] = row["default_energy_lowrank"] / row["exact_energy_lowrank"]
            row["load_avg_1min"] = os.getloadavg()[0]
            rows[name.split("layers.")[1]] = row
            del out, D, W0, W1
        done.append(li)
        tot = {k: sum(r[k] for r in rows.values()) for k in ("official_cpu_s", "default_cpu_s")}
        print(f"layer {li}: official {tot['official_cpu_s']:.0f} cpu-s, default {tot['default_cpu_s']:.0f} cpu-s "
              f"so far ({time.time() - t_all:.0f} s wall)", flush=True)
        partial.write_text(json.dumps({"layers_done": done, "rows": rows}, indent=1))
    return {"layers_done": done, "rows": rows}


def assemble(parts: list[dict]) -> dict:
    """Totals and fidelity over the per-matrix rows of one or more shards."""
    rows = {k: v for p in parts for k, v in p["rows"].items()}
    done = sorted(li for p in parts for li in p["layers_done"])
    tot = lambda key, sel=None: sum(r[key] for r in (sel or rows.values()))  # noqa: E731
    res = {"layers_run": len(done), "layers": done, "matrices": len(rows),
           "official_s": tot("official_s"), "default_s": tot("default_s"),
           "official_cpu_s": tot("official_cpu_s"), "default_cpu_s": tot("default_cpu_s"), "load_s": tot("load_s"),
           "default_rel_diff_vs_official": summarize([r["default_rel_diff"] for r in rows.values()]),
           "default_energy_lowrank": summarize([r["default_energy_lowrank"] for r in rows.values()]),
           "load_avg_1min": summarize([r["load_avg_1min"] for r in rows.values()])}
    res["speedup_cpu"] = res["official_cpu_s"] / res["default_cpu_s"]
    res["speedup_wall"] = res["official_s"] / res["default_s"]
    res["speedup_wall_incl_load"] = (res["official_s"] + res["load_s"]) / (res["default_s"] + res["load_s"])
    n_ex = [r for r in rows.values() if "exact_s" in r]
    if n_ex:
        ex = {"matrices": len(n_ex), "layers": sorted({int(k.split(".")[0]) for k, r in rows.items() if "exact_s" in r}),
              "official_cpu_s": tot("official_cpu_s", n_ex), "exact_cpu_s": tot("exact_cpu_s", n_ex),
              "default_cpu_s": tot("default_cpu_s", n_ex),
              "exact_rel_diff_vs_official": summarize([r["exact_rel_diff"] for r in n_ex]),
              "default_energy_ratio": summarize([r["default_energy_ratio"] for r in n_ex]),
              "default_rel_diff_vs_official": summarize([r["default_rel_diff"] for r in n_ex])}
        ex["speedup_cpu_exact"] = ex["official_cpu_s"] / ex["exact_cpu_s"]
        ex["speedup_cpu_default"] = ex["official_cpu_s"] / ex["default_cpu_s"]
        res["exact_subset"] = ex
    by_shape: dict = {}
    for k, r in rows.items():
        t = k.split(".")[-2]
        b = by_shape.setdefault(t, {"official_cpu_s": 0.0, "default_cpu_s": 0.0, "n": 0})
        b["official_cpu_s"] += r["official_cpu_s"]
        b["default_cpu_s"] += r["default_cpu_s"]
        b["n"] += 1
    res["per_target_cpu_s"] = by_shape
    res["per_matrix"] = rows
    return res


MERGEKIT = r"""
# per-tensor TIES (density 0.5, weights 1, 1) on the same checkpoints: mergekit 0.1.5's merge_group vs ours
# (merge_tensor), same tensors, same process, reading with our streaming reader; the embedding is left out
# because mergekit's argsort of its 311M-entry delta needs ~21 GB, more than this shared VM can spare.
import sys, time, json, torch
from shiftkit.sar.checkpoint import CheckpointReader
from shiftkit.sar import merge as mg
from mergekit.merge_methods import registry
from mergekit.merge_methods.base import TensorGroup
torch.set_num_threads(int(sys.argv[4]))
base, ex = CheckpointReader(sys.argv[1]), [CheckpointReader(p) for p in sys.argv[2:4]]
method = registry.get("ties")
t_mk = t_ours = 0.0; n = 0; worst = 0.0
for name in base.names:
    if "embed" in name:
        continue
    W0 = base.get(name); Ws = [e.get(name) for e in ex]
    s = time.perf_counter()
    group = TensorGroup.from_tensors([W0.float()] + [w.float() for w in Ws], base_index=0)
    params = {"weight": {1: 1.0, 2: 1.0}, "density": {1: 0.5, 2: 0.5}, "int8_mask": False,
              "normalize": method.default_normalize, "rescale": method.default_rescale, "lambda": 1.0}
    want = method.merge_group(group, **params).to(W0.dtype)
    t_mk += time.perf_counter() - s
    s = time.perf_counter()
    got = mg.merge_tensor("ties", W0, Ws, [1.0, 1.0], density=0.5)
    t_ours += time.perf_counter() - s
    worst = max(worst, float((got.float() - want.float()).abs().max()))
    n += 1
print(json.dumps({"tensors": n, "excluded": "model.embed_tokens.weight", "mergekit_ties_s": round(t_mk, 2),
                  "ours_ties_s": round(t_ours, 2), "max_abs_diff": worst,
                  "note": "merge math only (reads excluded), per tensor, density 0.5"}))
"""


def measured(cmd, env=None):
    """Run cmd under /usr/bin/time-like accounting: wall, peak RSS (MiB) of the child via wait4."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # read stdout, then stderr (children here print little), then reap with wait4 for the child's rusage
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:5]))} failed ({p.returncode}): {err.decode()[-3000:]}")
    measured.cpu_s = ru.ru_utime + ru.ru_stime  # the child's CPU seconds (robust to other jobs' load)
    return wall, ru.ru_maxrss / 1024.0, out.decode(), err.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--delta", choices=("flat", "lowrank"), default="flat")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--exact-every", type=int, default=7, help="also time solver=exact on every N-th layer (0: never)")
    ap.add_argument("--stop-at", default="", help="HH:MM: stop the interleaved timing after the current layer")
    ap.add_argument("--layer-range", default="", help="A:B: time only layers A..B-1 (one shard; --skip-extract)")
    ap.add_argument("--assemble", nargs="*", default=[], help="shard files (from --layer-range runs) to combine "
                    "instead of timing here")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sar_bench.json"))
    ap.add_argument("--skip-extract", action="store_true")
    ap.add_argument("--extract-only", action="store_true", help="only time the whole `sar extract` process")
    ap.add_argument("--extract-result", default="", help="with --assemble: take extract_process from this file")
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--mergekit-path", default="/tmp/sar_mk", help="where mergekit 0.1.5 is importable from")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="sar_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=str(ROOT))
    res: dict = {"shapes": "Qwen3-1.7B (hidden 2048, intermediate 6144, q 2048x2048, k/v 1024x2048, vocab 151936, tied)",
                 "layers_built": args.layers, "layers_full_model": L_FULL, "dtype": "bf16", "delta": args.delta,
                 "threads": args.threads, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                 "machine": f"{os.cpu_count()} CPUs (shared with other jobs), torch {torch.__version__}",
                 "official_label": "shiftkit's transcription of the official algorithm (shiftkit/sar/reference.py: "
                                   "two full fp32 SVDs per matrix)",
                 "command": "python benchmarks/bench_sar.py " + " ".join(sys.argv[1:])}
    out = Path(args.out)
    try:
        t0 = time.time()
        if not (work / "base" / "model.safetensors.index.json").exists():
            (work / "base").mkdir(exist_ok=True)
            (work / "tuned").mkdir(exist_ok=True)
            build_pair(work, args.layers, args.delta)
        res["build_s"] = round(time.time() - t0, 1)
        r = CheckpointReader(work / "base")
        res["largest_tensor_mib"] = max(r.nbytes(n) for n in r.names) / 2**20
        res["checkpoint_mib"] = sum(r.nbytes(n) for n in r.names) / 2**20
        res["load_avg_start"] = os.getloadavg()
        if args.extract_only:
            parts = None
        elif args.assemble:
            parts = [json.loads(Path(p).read_text()) for p in args.assemble]
            res["shards"] = [{"file": Path(p).name, "layers": q["layers_done"], "command": q.get("command", "")}
                             for p, q in zip(args.assemble, parts)]
        else:
            lr = range(*map(int, args.layer_range.split(":"))) if args.layer_range else range(args.layers)
            part_file = out.with_suffix(f".layers{lr.start}-{lr.stop - 1}.json")
            parts = [interleaved(work, lr, args.exact_every, args.stop_at, part_file)]
            parts[0]["command"] = res["command"]
            part_file.write_text(json.dumps(parts[0], indent=1))
            if args.layer_range:  # one shard: its rows only
                return
        if parts is not None:
            res["interleaved"] = assemble(parts)
        res["load_avg_after_interleaved"] = os.getloadavg()
        if args.extract_result:
            res["extract_process"] = json.loads(Path(args.extract_result).read_text())["extract_process"]
        elif not args.skip_extract:
            cmd = [sys.executable, "-m", "shiftkit", "sar", "extract", "--base", str(work / "base"), "--tuned",
                   str(work / "tuned"), "--out", str(work / "core"), f"edited_out={work / 'edited'}",
                   f"threads={args.threads}", "device=cpu", "core_dtype=fp32", "--json"]
            wall, rss, o, _ = measured(cmd, env)
            summ = json.loads(o)
            mats = json.loads((work / "core" / "sar_core.json").read_text())["matrices"]
            mat_s = sum(x["seconds"] for x in mats.values())
            res["extract_process"] = {"wall_s": round(wall, 2), "cpu_s": round(measured.cpu_s, 2),
                                      "peak_rss_mib": round(rss, 1), "load_avg_before": res["load_avg_start"],
                                      "command": " ".join(cmd[1:]),
                                      "matrices": summ["matrices"], "target_matrices_s": round(mat_s, 2),
                                      "fixed_s": round(wall - mat_s, 2), "energy": summ["energy"],
                                      "note": "whole `shiftkit sar extract` process over all built layers: core + "
                                              "edited checkpoint, default solver; fixed = wall - target-matrix time"}
            res["load_avg_end"] = os.getloadavg()
            if args.extract_only:
                out = out.with_suffix(".extract.json")
        if args.merge:
            mres = {"layers_built": args.layers, "delta": args.delta, "threads": args.threads,
                    "command": res["command"]}
            cmd = [sys.executable, "-m", "shiftkit", "sar", "merge", "--base", str(work / "base"), "--experts",
                   str(work / "tuned"), str(work / "edited"), "--method", "ties", "--out", str(work / "merged"),
                   "density=0.5", f"threads={args.threads}", "--json"]
            wall_m, rss_m, _, _ = measured(cmd, env)
            mres["merge_ties_ours"] = {"wall_s": round(wall_m, 2), "peak_rss_mib": round(rss_m, 1), "experts": 2}
            mk_env = dict(env, PYTHONPATH=os.pathsep.join([str(ROOT), args.mergekit_path]))
            try:
                wall_k, rss_k, out_k, _ = measured([sys.executable, "-c", MERGEKIT, str(work / "base"),
                                                    str(work / "tuned"), str(work / "edited"), str(args.threads)],
                                                   mk_env)
                mres["merge_ties_vs_mergekit"] = {**json.loads(out_k), "process_peak_rss_mib": round(rss_k, 1)}
            except RuntimeError as e:
                mres["merge_ties_vs_mergekit"] = f"mergekit not run: {str(e)[-300:]}"
            (out.parent / "sar_merge_bench.json").write_text(json.dumps(mres, indent=2) + "\n")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    iv = res.get("interleaved", res.get("extract_process"))
    print(json.dumps({k: v for k, v in iv.items() if k != "per_matrix"}, indent=2))


if __name__ == "__main__":
    main()
