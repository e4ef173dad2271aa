"""SAR extract: our streaming fast path vs a plain transcription of the official script, side by side.

Synthetic checkpoint pair with Qwen3-1.7B shapes (hidden 2048, intermediate 6144, 16 q / 8 kv heads of
128, vocab 151936, tied embeddings): random base, tuned = base + rank-64 delta (singular values 0.9^i) + noise, stored in bf16
(as RL checkpoints are). ``--layers`` builds a subset of the 28 layers (labelled in the results); the
official algorithm (both models loaded in fp32, two full SVDs per matrix) runs on ``--official-layers``
layers and is extrapolated to 28 layers. Both run as separate processes with the same thread count;
wall time and peak RSS (``wait4`` ru_maxrss) are measured per process. Optionally times
``shiftkit sar merge --method ties`` and mergekit's TIES (if ``mergekit`` is importable).

    nice .venv/bin/python benchmarks/bench_sar.py --layers 4 --official-layers 1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def build_pair(root: Path, layers: int, seed: int = 0):
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
            if "proj" in name:
                m, n = shape
                r = 64  # low rank with a decaying spectrum (0.9^i) plus noise
                U, _ = torch.linalg.qr(torch.randn(m, r, generator=g))
                Vt, _ = torch.linalg.qr(torch.randn(n, r, generator=g))
                W1 = W0 + (U * (0.9 ** torch.arange(r))) @ Vt.T + 2e-5 * torch.randn(shape, generator=g)
        wb.write(name, W0.to(torch.bfloat16))
        wt.write(name, W1.to(torch.bfloat16))
    wb.close()
    wt.close()
    for d in ("base", "tuned"):
        cfg.save_pretrained(root / d)


OFFICIAL = r"""
import sys, time, torch, json
from safetensors.torch import load_file
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from shiftkit.sar.reference import official_sar_delta
from shiftkit.sar.linalg import RankSpec
torch.set_num_threads(int(sys.argv[3]))
base_dir, tuned_dir, layers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[5])
def load(d):  # the official script loads both whole models in fp32
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update({k: v.float() for k, v in load_file(str(f)).items()})
    return out
t0 = time.time(); B, T = load(base_dir), load(tuned_dir); t_load = time.time() - t0
targets = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
out, per = {}, {}
t1 = time.time()
for name in B:
    if any(t in name for t in targets) and int(name.split(".")[2]) < layers:
        s = time.time()
        out[name] = official_sar_delta(B[name], T[name], RankSpec('fraction', 0.01))  # fp32 W_sar - W0
        per[name] = time.time() - s
t_edit = time.time() - t1
torch.save(out, sys.argv[6])
print(json.dumps({"load_s": t_load, "edit_s": t_edit, "per_matrix_s": per}))
"""


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
    return wall, ru.ru_maxrss / 1024.0, out.decode(), err.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--official-layers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sar_bench.json"))
    ap.add_argument("--skip-merge", action="store_true")
    ap.add_argument("--mergekit-path", default="/tmp/sar_mk", help="where mergekit 0.1.5 is importable from")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="sar_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=str(ROOT))
    res: dict = {"shapes": "Qwen3-1.7B (hidden 2048, intermediate 6144, q 2048x2048, k/v 1024x2048, vocab 151936, tied)",
                 "layers_built": args.layers, "layers_full_model": L_FULL, "dtype": "bf16",
                 "threads": args.threads, "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}"}
    try:
        t0 = time.time()
        if not (work / "base" / "model.safetensors.index.json").exists():
            (work / "base").mkdir(exist_ok=True)
            (work / "tuned").mkdir(exist_ok=True)
            build_pair(work, args.layers)
        res["build_s"] = round(time.time() - t0, 1)
        r = CheckpointReader(work / "base")
        largest = max(r.nbytes(n) for n in r.names)
        largest_target = max(r.nbytes(n) for n in r.names if "proj" in n)
        res["largest_tensor_mib"] = largest / 2**20
        res["largest_target_fp32_mib"] = largest_target * 2 / 2**20
        res["checkpoint_mib"] = sum(r.nbytes(n) for n in r.names) / 2**20

        # ours: full streaming extract + edited checkpoint
        cmd = [sys.executable, "-m", "shiftkit", "sar", "extract", "--base", str(work / "base"), "--tuned",
               str(work / "tuned"), "--out", str(work / "core"), f"edited_out={work / 'edited'}",
               f"threads={args.threads}", "device=cpu", "core_dtype=fp32", "--json"]
        wall, rss, out, _ = measured(cmd, env)
        summ = json.loads(out)
        mats = json.loads((work / "core" / "sar_core.json").read_text())["matrices"]
        mat_s = sum(r["seconds"] for r in mats.values())  # edit + cast + write of the target matrices
        per_layer_marginal = mat_s / args.layers
        res["ours"] = {"wall_s": round(wall, 2), "peak_rss_mib": round(rss, 1), "matrices": summ["matrices"],
                       "target_matrices_s": round(mat_s, 2),
                       "fixed_s": round(wall - mat_s, 2),
                       "per_layer_s": round(per_layer_marginal, 2),
                       "extrapolated_28_layers_s": round(wall + (L_FULL - args.layers) * per_layer_marginal, 1),
                       "extrapolated_28_layers_s_conservative": round(wall / args.layers * L_FULL, 1),
                       "per_matrix_s": {k.split("layers.")[1]: r["seconds"] for k, r in mats.items()},
                       "note": "fixed = whole process minus target-matrix time (imports, embedding/norm I/O, hashing, "
                               "core + diagnostics); extrapolated = wall + (28 - layers) x per-layer matrix time; "
                               "conservative = wall / layers x 28",
                       "param_fraction": summ["param_fraction"], "energy": summ["energy"]}

        # official transcription on a subset of layers
        off_out = work / "official.pt"
        wall_o, rss_o, out_o, _ = measured([sys.executable, "-c", OFFICIAL, str(work / "base"), str(work / "tuned"),
                                            str(args.threads), str(ROOT), str(args.official_layers), str(off_out)], env)
        o = json.loads(out_o)
        per_layer = o["edit_s"] / args.official_layers
        res["official"] = {"layers_run": args.official_layers, "edit_s": round(o["edit_s"], 2),
                           "load_s": round(o["load_s"], 2), "wall_s": round(wall_o, 2), "peak_rss_mib": round(rss_o, 1),
                           "edit_s_per_layer": round(per_layer, 2),
                           "extrapolated_28_layers_s": round(per_layer * L_FULL, 1),
                           "per_matrix_s": {k.split("layers.")[1]: round(v, 2) for k, v in o["per_matrix_s"].items()},
                           "note": "two full fp32 SVDs per matrix; both models held in fp32; extrapolated = per-layer edit time x 28"}
        off_28 = o["load_s"] * L_FULL / max(args.layers, 1) + per_layer * L_FULL  # its load scales with the model too
        res["official"]["extrapolated_28_layers_incl_load_s"] = round(off_28, 1)
        res["speedup_per_layer_linear_algebra"] = round(per_layer / per_layer_marginal, 1)
        res["speedup_extrapolated_28_layers"] = round(off_28 / res["ours"]["extrapolated_28_layers_s"], 1)
        res["speedup_extrapolated_28_layers_conservative"] = round(
            per_layer * L_FULL / res["ours"]["extrapolated_28_layers_s_conservative"], 1)
        # equal output on the layers both ran
        from safetensors import safe_open
        ref = torch.load(off_out)
        errs = {}
        with safe_open(str(work / "core" / "core.safetensors"), "pt") as core:
            for n, D in ref.items():
                ours = core.get_tensor(n + ".B").float() @ core.get_tensor(n + ".A").float()
                errs[n.split("layers.")[1]] = la.rel_err(ours, D)
        res["equal_output"] = {"max_rel_err_of_edit_vs_official": max(errs.values()), "per_matrix": errs,
                               "note": "||B A - D_official|| / ||D_official||, fp32 edit before the cast to bf16"}
        res["rss_budget_mib"] = {"largest_tensor_x3": round(3 * largest / 2**20, 1),
                                 "ours_minus_3x_largest": round(rss - 3 * largest / 2**20, 1)}

        if not args.skip_merge:
            cmd = [sys.executable, "-m", "shiftkit", "sar", "merge", "--base", str(work / "base"), "--experts",
                   str(work / "tuned"), str(work / "edited"), "--method", "ties", "--out", str(work / "merged"),
                   "density=0.5", f"threads={args.threads}", "--json"]
            wall_m, rss_m, _, _ = measured(cmd, env)
            res["merge_ties_ours"] = {"wall_s": round(wall_m, 2), "peak_rss_mib": round(rss_m, 1), "experts": 2}
            mk_env = dict(env, PYTHONPATH=os.pathsep.join([str(ROOT), args.mergekit_path]))
            try:
                wall_k, rss_k, out_k, _ = measured([sys.executable, "-c", MERGEKIT, str(work / "base"),
                                                    str(work / "tuned"), str(work / "edited"), str(args.threads)],
                                                   mk_env)
                res["merge_ties_vs_mergekit"] = {**json.loads(out_k), "process_peak_rss_mib": round(rss_k, 1)}
            except RuntimeError as e:
                res["merge_ties_vs_mergekit"] = f"mergekit not run: {str(e)[-300:]}"
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "equal_output"}, indent=2))
    print("max rel err vs official:", res.get("equal_output", {}).get("max_rel_err_of_edit_vs_official"))


if __name__ == "__main__":
    main()
