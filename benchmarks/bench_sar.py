"""SAR extract at equal fidelity: shiftkit vs the official two-SVD algorithm, interleaved matrix by matrix.

A speedup counts only at equal output: every timed shiftkit edit is compared with the exact edit
(``official_sar_delta``, shiftkit's transcription of the official ``svd_rewire_parallel.py``: two full fp32
SVDs per matrix), and the bound is **relative difference <= 1e-3** (``shiftkit.sar.linalg.AUTO_MAX_ERR``).
``edit_rel_diff_max`` is the worst difference over every timed matrix; ``solver=auto`` keeps the randomized
SVD only where its own error estimate is below the bound and otherwise runs the exact SVD (one SVD, not two:
the official algorithm's SVD of W0 is not needed for the default full base rank and full mask).

Deltas (``--deltas``):

* ``rl``: an RL-shaped spectrum at Qwen3-1.7B shapes (hidden 2048, intermediate 6144, q 2048x2048, k/v
  1024x2048): singular values i^-0.45 with random singular vectors. 0.45 is the median power-law exponent
  (over the top 10 k directions) of a real RL delta, SmolLM2-135M-Instruct after 10 GRPO steps (lr 1e-5);
  that delta keeps 13-68% (median ~30%) of its energy in the top 1% of directions and ~65% in the top 10%, as
  this synthetic does. fp32 storage (the update's own spectrum, not bf16 rounding noise).
* ``flat``: iid Gaussian delta at the same shapes (no spectral gap anywhere; the earlier benchmark's default,
  where the unchecked randomized edit differed from the exact one by 27-63%). fp32 storage.
* ``--smollm2 BASE TUNED``: a real RL delta, every q/k/v/o/gate/up/down matrix of SmolLM2-135M-Instruct
  (``BASE`` from ``shiftkit model import-gguf smollm2``; ``TUNED`` after ``shiftkit rl``, see
  ``benchmarks/README.md``).

Timing (one thread, ``OMP_WAIT_POLICY=PASSIVE``): per matrix the driver reads W0 and W1 once and runs, in
alternating order, the official algorithm and ``sar_edit_matrix`` with the default options (``solver=auto``),
and on every ``--exact-every``-th layer also ``solver=exact``; CPU seconds (``time.process_time``: with one
thread, robust to other jobs on a shared machine) and wall seconds. ``ratio`` = summed official CPU seconds /
summed shiftkit CPU seconds on the 1.7B-shaped RL delta; per delta and per matrix in ``deltas``.

    python benchmarks/bench_sar.py --layers 2 --deltas rl flat \
        --smollm2 /work/models/smollm2 /tmp/smolrl/run/final --merge

``--merge`` also times ``shiftkit.sar.merge.merge_tensor('ties')`` against mergekit's TIES on a 2-layer
low-rank pair (3 interleaved repeats; ``sar_merge_bench.json``).
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

from benchmarks.common import load_avg, provenance, single_thread, spread  # noqa: E402
from shiftkit.io import atomic_write_json  # noqa: E402
from shiftkit.sar import linalg as la  # noqa: E402
from shiftkit.sar.checkpoint import CheckpointReader, ShardedWriter  # noqa: E402

H, I, NQ, NKV, HD, L_FULL = 2048, 6144, 16, 8, 128, 28
V = 8192  # a small vocabulary: the embedding is no SAR target here, and a 151936-row one costs 1.2 GB per checkpoint
RL_ALPHA = 0.45  # singular values i^-alpha of the RL-shaped delta (the SmolLM2 GRPO delta's median exponent)


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


def build_pair(root: Path, layers: int, delta: str, seed: int = 0, dtype=torch.float32):
    """A base/tuned pair with Qwen3-1.7B layer shapes; ``delta``: rl (i^-RL_ALPHA spectrum), flat (iid) or
    lowrank (rank 64, 0.9^i, plus 2e-5 noise)."""
    from transformers import Qwen3Config

    cfg = Qwen3Config(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=layers,
                      num_attention_heads=NQ, num_key_value_heads=NKV, head_dim=HD, tie_word_embeddings=True,
                      max_position_embeddings=4096)
    g = torch.Generator().manual_seed(seed)
    entries = plan(layers)
    wb = ShardedWriter(root / "base", [(n, dtype, s) for n, s in entries], 2 << 30)
    wt = ShardedWriter(root / "tuned", [(n, dtype, s) for n, s in entries], 2 << 30)
    bases: dict = {}  # one orthonormal pair per shape; each matrix permutes and flips its columns

    def orth(shape):
        if shape not in bases:
            m, n = shape
            r = min(m, n)
            bases[shape] = (torch.linalg.qr(torch.randn(m, r, generator=g))[0],
                            torch.linalg.qr(torch.randn(n, r, generator=g))[0])
        U, Vb = bases[shape]
        r = U.shape[1]
        pu, pv = torch.randperm(r, generator=g), torch.randperm(r, generator=g)
        su = torch.randint(0, 2, (r,), generator=g) * 2.0 - 1
        return U[:, pu] * su, Vb[:, pv]

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
            elif "proj" in name and delta == "rl":
                U, Vb = orth(shape)
                S = torch.arange(1, U.shape[1] + 1, dtype=torch.float32) ** (-RL_ALPHA)
                dW = (U * S) @ Vb.T
                W1 = W0 + dW * (2e-3 * float(W0.norm()) / float(dW.norm()))  # ||dW|| = 2e-3 ||W0||
            elif "proj" in name:  # flat: iid Gaussian delta, no spectral gap anywhere
                W1 = W0 + 1e-3 * torch.randn(shape, generator=g)
        wb.write(name, W0.to(dtype))
        wt.write(name, W1.to(dtype))
    wb.close()
    wt.close()
    for d in ("base", "tuned"):
        cfg.save_pretrained(root / d)


TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def interleaved(base: Path, tuned: Path, layers: range, exact_every: int) -> dict:
    """Per-matrix side-by-side timing and fidelity on ``layers`` of a base/tuned pair."""
    from shiftkit.sar.edit import EditOptions, sar_edit_matrix
    from shiftkit.sar.linalg import RankSpec
    from shiftkit.sar.reference import official_sar_delta

    rb, rt = CheckpointReader(base), CheckpointReader(tuned)
    spec = RankSpec("fraction", 0.01)
    variants = {"default": EditOptions(delta_rank=spec), "exact": EditOptions(delta_rank=spec, solver="exact")}
    rows: dict[str, dict] = {}
    t_all = time.time()
    for li in layers:
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
            row["default_solver"] = out["default"].stats["solver"]
            row["default_svd_err_est"] = out["default"].stats["svd_err_est"]
            row["speedup_cpu"] = row["official_cpu_s"] / row["default_cpu_s"]
            row["load_avg_1min"] = round(os.getloadavg()[0], 2)
            rows[name.split("layers.")[1]] = row
            del out, D, W0, W1
        tot = {k: sum(r[k] for r in rows.values()) for k in ("official_cpu_s", "default_cpu_s")}
        print(f"{base.parent.name} layer {li}: official {tot['official_cpu_s']:.0f} cpu-s, default "
              f"{tot['default_cpu_s']:.0f} cpu-s so far ({time.time() - t_all:.0f} s wall)", flush=True)
    return rows


def assemble(rows: dict) -> dict:
    """Totals, spreads and fidelity over the per-matrix rows of one delta."""
    tot = lambda key, sel=None: sum(r[key] for r in (sel or rows.values()))  # noqa: E731
    res = {"matrices": len(rows), "official_cpu_s": tot("official_cpu_s"), "default_cpu_s": tot("default_cpu_s"),
           "official_s": tot("official_s"), "default_s": tot("default_s"), "load_s": tot("load_s"),
           "official_cpu_s_per_matrix": spread([r["official_cpu_s"] for r in rows.values()]),
           "default_cpu_s_per_matrix": spread([r["default_cpu_s"] for r in rows.values()]),
           "speedup_cpu_per_matrix": spread([r["speedup_cpu"] for r in rows.values()]),
           "edit_rel_diff": spread([r["default_rel_diff"] for r in rows.values()]),
           "default_solver": {k: sum(r["default_solver"] == k for r in rows.values()) for k in ("randomized", "exact")},
           "load_avg_1min": spread([r["load_avg_1min"] for r in rows.values()])}
    res["ratio"] = res["official_cpu_s"] / res["default_cpu_s"]
    res["edit_rel_diff_max"] = res["edit_rel_diff"]["max"]
    n_ex = [r for r in rows.values() if "exact_s" in r]
    if n_ex:
        res["exact_subset"] = {"matrices": len(n_ex), "official_cpu_s": tot("official_cpu_s", n_ex),
                               "exact_cpu_s": tot("exact_cpu_s", n_ex), "default_cpu_s": tot("default_cpu_s", n_ex),
                               "exact_rel_diff": spread([r["exact_rel_diff"] for r in n_ex])}
        res["exact_subset"]["ratio_exact"] = res["exact_subset"]["official_cpu_s"] / res["exact_subset"]["exact_cpu_s"]
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


def merge_bench(work: Path, threads: int, repeats: int) -> dict:
    """TIES merge math, ours vs mergekit's, on a 2-layer low-rank pair (bf16, as before): ``repeats`` runs of
    the per-tensor interleaved timing snippet, each in a fresh process."""
    from importlib.metadata import version

    mw = work / "merge"
    if not (mw / "second" / "model.safetensors.index.json").exists():
        for d in ("base", "tuned", "second"):
            (mw / d).mkdir(parents=True, exist_ok=True)
        build_pair(mw, 2, "lowrank", dtype=torch.bfloat16)
        rb, rt = CheckpointReader(mw / "base"), CheckpointReader(mw / "tuned")
        w2 = ShardedWriter(mw / "second", [(n, torch.bfloat16, tuple(rb.get(n).shape)) for n in rb.names], 2 << 30)
        for n in rb.names:  # a second expert on the same base: half the first delta, rows reversed
            W0, W1 = rb.get(n).float(), rt.get(n).float()
            d = (W1 - W0).flip(0) if W0.dim() == 2 else W1 - W0
            w2.write(n, (W0 + 0.5 * d).to(torch.bfloat16))
        w2.close()
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=str(ROOT))
    runs = []
    for _ in range(repeats):
        _, rss, out, _ = measured([sys.executable, "-c", MERGEKIT, str(mw / "base"), str(mw / "tuned"),
                                   str(mw / "second"), str(threads)], env)
        runs.append({**json.loads(out), "process_peak_rss_mib": round(rss, 1)})
    ours, mk = [r["ours_ties_s"] for r in runs], [r["mergekit_ties_s"] for r in runs]
    return {"what": "TIES merge math (density 0.5, weights 1, 1) per tensor: shiftkit.sar.merge.merge_tensor vs "
                    "mergekit's TIES merge_group, same tensors, same process, interleaved per tensor",
            "peer": {"name": "mergekit TIES (merge_methods registry 'ties')", "version": version("mergekit")},
            "ours_s": spread(ours), "mergekit_s": spread(mk), "ratio": statistics.median(mk) / statistics.median(ours),
            "max_abs_diff": max(r["max_abs_diff"] for r in runs), "tensors": runs[0]["tensors"],
            "excluded": runs[0]["excluded"], "runs": runs,
            "matched": {"note": "shiftkit's TIES and mergekit's TIES on the same tensors with the same parameters "
                                "(density 0.5, weights 1, 1, mergekit's default normalize/rescale, lambda 1)",
                        "dtype": "bf16 checkpoints, fp32 merge math", "gradient_checkpointing": "n/a",
                        "threads": threads, "layers": 2, "delta": "two low-rank synthetic experts at Qwen3-1.7B "
                        "layer shapes", "repeats": repeats}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2, help="1.7B-shaped layers built per synthetic delta")
    ap.add_argument("--deltas", nargs="*", default=["rl", "flat"], choices=["rl", "flat", "lowrank"])
    ap.add_argument("--smollm2", nargs=2, metavar=("BASE", "TUNED"), default=None)
    ap.add_argument("--smollm2-layers", default="", help="A:B: only these SmolLM2 layers (default: all)")
    ap.add_argument("--exact-every", type=int, default=1, help="also time solver=exact on every N-th layer (0: never)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sar_bench.json"))
    ap.add_argument("--merge", action="store_true")
    ap.add_argument("--merge-repeats", type=int, default=3)
    args = ap.parse_args()
    single_thread(args.threads)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="sar_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    loads = [load_avg()]
    prov = provenance()  # the tree as the run starts (commits made while it runs are not what ran)
    res: dict = {"what": "SAR extract (delta rank 1% of min(m, n), full base rank, full mask) at equal fidelity: "
                         "CPU seconds per matrix, shiftkit default (solver=auto) vs the official two-SVD algorithm",
                 **prov,
                 "peer": {"name": "official SAR algorithm (zzlsms/RL-Rewiring scripts/svd_rewire_parallel.py), as "
                                  "transcribed in shiftkit/sar/reference.py", "version": "7a426a4"},
                 "bound": "relative difference of the timed edit from the exact (official) edit <= 1e-3",
                 "deltas": {}}
    try:
        for kind in args.deltas:
            d = work / kind
            if not (d / "base" / "model.safetensors.index.json").exists():
                (d / "base").mkdir(parents=True, exist_ok=True)
                (d / "tuned").mkdir(parents=True, exist_ok=True)
                t0 = time.time()
                build_pair(d, args.layers, kind)
                print(f"built {kind} pair in {time.time() - t0:.0f} s", flush=True)
            rows = interleaved(d / "base", d / "tuned", range(args.layers), args.exact_every)
            res["deltas"][f"qwen3_1.7b_shapes/{kind}"] = {"layers": args.layers, **assemble(rows)}
            loads.append(load_avg())
        if args.smollm2:
            b, t = map(Path, args.smollm2)
            n = sum(1 for x in CheckpointReader(b).names if x.endswith("mlp.down_proj.weight"))
            lr = range(*map(int, args.smollm2_layers.split(":"))) if args.smollm2_layers else range(n)
            rows = interleaved(b, t, lr, args.exact_every * 10 if args.exact_every else 0)
            res["deltas"]["smollm2_grpo"] = {"base": str(b), "tuned": str(t), "layers": [lr.start, lr.stop],
                                             **assemble(rows)}
            loads.append(load_avg())
        if not res["deltas"]:
            if args.merge:
                atomic_write_json(Path(args.out).parent / "sar_merge_bench.json",
                                  {**prov, **merge_bench(work, args.threads, args.merge_repeats),
                                   "load_avg": [loads[0], load_avg()]})
            return
        allrows = [r for v in res["deltas"].values() for r in v["per_matrix"].values()]
        res["edit_rel_diff_max"] = max(r["default_rel_diff"] for r in allrows)
        head = res["deltas"].get("qwen3_1.7b_shapes/rl") or next(iter(res["deltas"].values()))
        res["ratio"] = head["ratio"]
        res["ratio_note"] = ("official CPU seconds / shiftkit CPU seconds summed over the matrices of "
                             + ("the 1.7B-shaped RL delta" if "qwen3_1.7b_shapes/rl" in res["deltas"] else
                                "the first delta") + "; every delta's own ratio is in deltas.*.ratio")
        res["min_median_max"] = {"speedup_cpu_per_matrix": head["speedup_cpu_per_matrix"],
                                 "official_cpu_s_per_matrix": head["official_cpu_s_per_matrix"],
                                 "default_cpu_s_per_matrix": head["default_cpu_s_per_matrix"]}
        res["matched"] = {"note": "the same matrices, read once, both sides timed back to back in alternating order; "
                                  "fidelity of every timed shiftkit edit measured against the official edit",
                          "delta_rank": "fraction 0.01 (official default)", "base_rank": "full", "mask": "full",
                          "dtype": "fp32 storage and math", "gradient_checkpointing": "n/a",
                          "threads": args.threads, "omp_wait_policy": "PASSIVE", "layers": args.layers,
                          "deltas": list(res["deltas"])}
        if args.merge:
            m = merge_bench(work, args.threads, args.merge_repeats)
            loads.append(load_avg())
            mres = {**prov, **m, "load_avg": loads[-2:]}
            atomic_write_json(Path(args.out).parent / "sar_merge_bench.json", mres)
            print(json.dumps({k: mres[k] for k in ("ratio", "ours_s", "mergekit_s", "max_abs_diff")}, indent=1))
        res["load_avg"] = loads
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    atomic_write_json(args.out, res)
    print(json.dumps({"ratio": res["ratio"], "edit_rel_diff_max": res["edit_rel_diff_max"]} |
                     {k: {x: v[x] for x in ("ratio", "edit_rel_diff_max", "default_solver")}
                      for k, v in res["deltas"].items()}, indent=1))


if __name__ == "__main__":
    main()
