"""SAR solvers on realistic updates: exact vs randomized on real RL/SFT deltas and flat synthetic spectra.

Three sources of deltas:

* ``toy``: the toy world's weak SFT model (base) and GRPO runs from it (tuned), one per ``--toy-rl`` dir
  (one per seed); tiny matrices (min(m, n) = 80), absolute delta ranks ``--toy-ranks``.
* ``smollm2``: SmolLM2-135M (``shiftkit model import-gguf smollm2``) and a short SFT of it on this machine
  (``--smol-tuned``); official delta rank 0.01 and 0.05.
* ``synthetic``: flat spectra, Qwen3-1.7B MLP/attention shapes: iid Gaussian (Marchenko-Pastur) and
  prescribed power laws S_i ~ i^-a, delta rank 1% (k = 20).

Per matrix and solver: the energy ratio (kept rank-k energy sum S_k^2 of the solver / optimal rank-k energy
from the exact SVD), the relative difference of the SAR edit from the exact edit, ||E - E_exact|| /
||E_exact||, and seconds. Solvers: ``exact`` (full SVD of dW), ``randomized`` (the library's randomized
subspace iteration, niter=16, oversample=10; seeds 0-2 give its own spread), ``randomized niter=4`` (cheaper),
and ``exact, tuned rounded to bf16`` (the exact solver on the same pair after storing the tuned weights in bf16,
as RL checkpoints are): how far a storage-precision perturbation alone moves the exact edit.
The randomized solver falls back to the exact one when its sketch (2k + 10 columns) is at least half of
min(m, n); the rows say how many matrices really ran randomized.

Downstream: the edited checkpoints are written with ``shiftkit.sar.pipeline.extract`` (``solver=exact`` and
``solver=randomized`` with seeds 0, 1, 2) and evaluated: toy world with ``shiftkit.evaluate.evaluate_model``
(greedy accuracy and pass@1 from 16 samples on 200 held-out problems); SmolLM2 by held-out completion NLL
per token and greedy exact-match accuracy on the first 100 held-out rows of the SFT task. The SmolLM2
matrix-level rows cover every 6th layer (35 matrices) to fit the shared machine; the downstream edits
cover all 210 target matrices.

    .venv/bin/shiftkit world build out=/tmp/h1/world strong_steps=20 threads=1
    for s in 0 1 2; do .venv/bin/shiftkit rl model=/tmp/h1/world/weak/final out=/tmp/h1/grpo_s$s seed=$s threads=1; done
    .venv/bin/shiftkit model import-gguf smollm2 --out /tmp/h1/smol/base
    python benchmarks/bench_sar_realistic.py --make-smol-data /tmp/h1/smol   # train.jsonl / test.jsonl
    .venv/bin/shiftkit sft model=/tmp/h1/smol/base data=/tmp/h1/smol/train.jsonl out=/tmp/h1/smol/sft steps=40 \\
        batch_size=8 lr=5e-5 warmup=4 schedule=constant weight_decay=0 threads=1
    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_sar_realistic.py \\
        --toy-base /tmp/h1/world/weak/final --toy-rl /tmp/h1/grpo_s0/final /tmp/h1/grpo_s1/final /tmp/h1/grpo_s2/final \\
        --smol-base /tmp/h1/smol/base --smol-tuned /tmp/h1/smol/sft/final --smol-test /tmp/h1/smol/test.jsonl \\
        --work /tmp/h1/sar_real
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shiftkit.io import atomic_write_json, read_jsonl  # noqa: E402
from shiftkit.sar import linalg as la  # noqa: E402
from shiftkit.sar.checkpoint import CheckpointReader  # noqa: E402
from shiftkit.sar.edit import EditOptions, sar_edit_matrix  # noqa: E402
from shiftkit.sar.pipeline import DEFAULT_TARGETS  # noqa: E402

SOLVERS = {  # name -> EditOptions overrides (delta rank added per call)
    "exact": {"solver": "exact"},
    "randomized": {"solver": "randomized"},
    "randomized_seed1": {"solver": "randomized", "seed": 1},
    "randomized_seed2": {"solver": "randomized", "seed": 2},
    "randomized_niter4": {"solver": "randomized", "niter": 4},
}


def summarize(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "mean": sum(xs) / len(xs), "n": len(xs)}


def ran_randomized(m: int, n: int, k: int, oversample: int = 10) -> bool:
    full = min(m, n)
    l = min(full, 2 * k + oversample)
    return not (l >= full or 2 * l >= full)


def matrix_rows(W0: torch.Tensor, W1: torch.Tensor, rank: str, S: torch.Tensor | None = None) -> dict:
    """All solvers on one matrix: energy ratio, rel diff from the exact edit, seconds (S: dW's singular values)."""
    W0, W1 = W0.float(), W1.float()
    spec = la.parse_rank(rank)
    out: dict = {}
    edits = {}
    for name, kw in SOLVERS.items():
        s = time.perf_counter()
        e = sar_edit_matrix(W0, W1, EditOptions(delta_rank=spec, **kw))
        edits[name] = (e, time.perf_counter() - s)
    s = time.perf_counter()
    e16 = sar_edit_matrix(W0, W1.to(torch.bfloat16).float(), EditOptions(delta_rank=spec, solver="exact"))
    edits["exact_tuned_bf16"] = (e16, time.perf_counter() - s)
    ex, _ = edits["exact"]
    E_ex = ex.B_mq @ ex.A_qn
    if S is None:
        S = torch.linalg.svdvals((W1 - W0).double())
    k = ex.stats["k"]
    m, n = W0.shape
    out.update({"m": m, "n": n, "k": k, "randomized_ran": ran_randomized(m, n, k),
                "energy_lowrank_exact": ex.stats["energy_lowrank"],
                "gap_S_k1_over_S_k": float(S[k] / S[k - 1]) if k < S.numel() and S[k - 1] > 0 else 0.0,
                "S_k_over_S_1": float(S[k - 1] / S[0]) if S[0] > 0 else 0.0})
    opt = ex.stats["energy_lowrank"]
    for name, (e, sec) in edits.items():
        out[name] = {"seconds": sec, "rel_diff_vs_exact": la.rel_err(e.B_mq @ e.A_qn, E_ex)}
        if name != "exact_tuned_bf16":  # its delta is another one (rounded): no energy ratio to the original's
            out[name]["energy_ratio"] = e.stats["energy_lowrank"] / opt if opt > 0 else 1.0
    return out


def pair_matrices(base: str, tuned: str, ranks: list[str], layer_every: int = 1) -> dict:
    """Matrix-level rows for every target matrix (of every ``layer_every``-th layer)."""
    rb, rt = CheckpointReader(base), CheckpointReader(tuned)
    names = [n for n in rb.names if len(rb.shape(n)) == 2 and any(t in n for t in DEFAULT_TARGETS)
             and (".layers." not in n or int(n.split(".layers.")[1].split(".")[0]) % layer_every == 0)]
    rows: dict = {r: {} for r in ranks}
    for n in names:
        W0, W1 = rb.get(n).float(), rt.get(n).float()
        S = torch.linalg.svdvals((W1 - W0).double())
        for r in ranks:
            rows[r][n] = matrix_rows(W0, W1, r, S)
    return {r: {"matrices": len(rows[r]), "per_matrix": rows[r], "summary": summary_of(rows[r])} for r in ranks}


def summary_of(rows: dict) -> dict:
    out = {"randomized_ran": sum(r["randomized_ran"] for r in rows.values()),
           "energy_lowrank_exact": summarize([r["energy_lowrank_exact"] for r in rows.values()]),
           "gap_S_k1_over_S_k": summarize([r["gap_S_k1_over_S_k"] for r in rows.values()])}
    ran = [r for r in rows.values() if r["randomized_ran"]]
    for name in list(SOLVERS) + ["exact_tuned_bf16"]:
        sel = rows.values() if name.startswith("exact") else ran
        out[name] = {"energy_ratio": summarize([r[name]["energy_ratio"] for r in sel if "energy_ratio" in r[name]]),
                     "rel_diff_vs_exact": summarize([r[name]["rel_diff_vs_exact"] for r in sel]),
                     "seconds_total": sum(r[name]["seconds"] for r in rows.values())}
    return out


def extract_edited(base: str, tuned: str, out: Path, rank: str, solver: str, seed: int) -> str:
    from shiftkit.sar.pipeline import ExtractConfig, extract

    edited = out / "edited"
    if not (edited / "config.json").exists():
        extract(base, tuned, out / "core", ExtractConfig(delta_rank=rank, solver=solver, seed=seed, device="cpu",
                                                          core_dtype="fp32", edited_out=str(edited), diagnostics=False))
    return str(edited)


DOWN_VARIANTS = [("exact", "exact", 0), ("randomized", "randomized", 0), ("randomized_seed1", "randomized", 1),
                 ("randomized_seed2", "randomized", 2)]


def toy_eval(path: str, n: int, samples: int) -> dict:
    from shiftkit.evaluate import evaluate_model
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import Mixture, eval_set

    model, tok = load_model_and_tokenizer(path)
    ev = evaluate_model(model, tok, eval_set(["add", "mul"], n), Mixture(["add", "mul"]).reward, n_samples=samples,
                        seed=0, progress=False)
    return {k: v for k, v in ev.items() if k != "per_problem"}


def smol_eval(path: str, test: list[dict]) -> dict:
    from shiftkit.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(path)
    model.eval()
    nll, ntok, correct = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(test), 25):
            rows = test[i:i + 25]
            for r in rows:
                p = tok(r["prompt"], return_tensors="pt").input_ids
                c = tok(r["completion"], add_special_tokens=False, return_tensors="pt").input_ids
                ids = torch.cat([p, c], 1)
                logp = model(input_ids=ids).logits[0, p.shape[1] - 1:-1].float().log_softmax(-1)
                nll -= float(logp.gather(-1, c[0][:, None]).sum())
                ntok += c.shape[1]
                g = model.generate(p, max_new_tokens=c.shape[1] + 1, do_sample=False, pad_token_id=tok.eos_token_id)
                text = tok.decode(g[0, p.shape[1]:], skip_special_tokens=True)
                correct += int(text.strip().split()[:1] == r["completion"].strip().split()[:1])
    return {"nll_per_token": nll / ntok, "exact_match": correct / len(test), "n": len(test)}


def synthetic(seed: int = 0) -> dict:
    """Flat synthetic deltas on a random base, 2048 x 2048 (q_proj's shape): an iid Gaussian delta
    (Marchenko-Pastur spectrum) and prescribed power laws S_i ~ i^-a. (The iid Gaussian delta on all 196
    Qwen3-1.7B-shaped matrices is in ``bench_sar.py``.)"""
    g = torch.Generator().manual_seed(seed)
    res = {}
    for shape, laws in (((2048, 2048), (0.05, 0.1, 0.3)),):
        m, n = shape
        W0 = 0.02 * torch.randn(shape, generator=g)
        cases = {"iid_gaussian": 1e-3 * torch.randn(shape, generator=g)}
        if laws:
            U, _ = torch.linalg.qr(torch.randn(m, n, generator=g))
            V, _ = torch.linalg.qr(torch.randn(n, n, generator=g))
            for a in laws:
                s = torch.arange(1, n + 1, dtype=torch.float32) ** -a
                cases[f"power_{a}"] = (U * (1e-3 * s * (m ** 0.5))) @ V.T
        for name, D in cases.items():
            res[f"{m}x{n}/{name}"] = matrix_rows(W0, W0 + D, "0.01", torch.linalg.svdvals(D))
    return {"per_matrix": res, "summary": summary_of(res)}


def make_smol_data(d: Path) -> None:
    rng = random.Random(0)
    seen: set = set()

    def rows(n):
        out = []
        while len(out) < n:
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            p = f"Question: what is {a} plus {b}?\nAnswer:"
            if p not in seen:
                seen.add(p)
                out.append({"prompt": p, "completion": f" {a + b}"})
        return out

    d.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", 2000), ("test", 200)):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(n)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--make-smol-data", default="", help="write the SmolLM2 SFT task (train/test JSONL) here and exit")
    ap.add_argument("--toy-base", default="")
    ap.add_argument("--toy-rl", nargs="*", default=[])
    ap.add_argument("--toy-ranks", nargs="*", default=["1", "4", "8"])
    ap.add_argument("--toy-eval-n", type=int, default=100)
    ap.add_argument("--toy-samples", type=int, default=16)
    ap.add_argument("--smol-base", default="")
    ap.add_argument("--smol-tuned", default="")
    ap.add_argument("--smol-test", default="")
    ap.add_argument("--smol-ranks", nargs="*", default=["0.01", "0.05"])
    ap.add_argument("--smol-layer-every", type=int, default=6, help="matrix-level rows on every N-th layer "
                    "(the downstream edits always cover all layers)")
    ap.add_argument("--smol-test-n", type=int, default=100, help="held-out rows evaluated")
    ap.add_argument("--smol-downstream-seeds", type=int, default=2, help="randomized seeds evaluated downstream")
    ap.add_argument("--parts", nargs="*", default=["toy", "smollm2", "synthetic"],
                    help="which parts to (re)run; the others are kept from an existing --out file")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default="/tmp/sar_realistic")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sar_realistic.json"))
    a = ap.parse_args()
    if a.make_smol_data:
        make_smol_data(Path(a.make_smol_data))
        return
    torch.set_num_threads(a.threads)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(a.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    res: dict = {k: v for k, v in old.items() if k in ("toy", "smollm2", "synthetic") and k not in a.parts}
    res["commands"] = {**old.get("commands", {}),
                       **{p: "python benchmarks/bench_sar_realistic.py " + " ".join(sys.argv[1:]) for p in a.parts}}
    res |= {"what": "SAR delta solvers (exact vs randomized) on real RL/SFT deltas and flat synthetic spectra",
                 "solvers": {**SOLVERS, "exact_tuned_bf16": "exact solver after rounding the tuned weights to bf16"},
                 "threads": a.threads, "torch": torch.__version__, "cpu_count": os.cpu_count()}

    def save():
        atomic_write_json(out, res)

    if "toy" in a.parts and a.toy_base and a.toy_rl:
        toy: dict = {"base": a.toy_base, "rl": a.toy_rl, "ranks": a.toy_ranks, "matrices": {}, "downstream": {}}
        res["toy"] = toy
        ev = lambda p: toy_eval(p, a.toy_eval_n, a.toy_samples)  # noqa: E731
        toy["downstream"]["base"] = ev(a.toy_base)
        for i, rl in enumerate(a.toy_rl):
            toy["matrices"][f"rl{i}"] = {r: v["summary"] for r, v in pair_matrices(a.toy_base, rl, a.toy_ranks).items()}
            d = {"rl": ev(rl)}
            for rank in a.toy_ranks:
                for name, solver, seed in DOWN_VARIANTS:
                    p = extract_edited(a.toy_base, rl, work / f"toy{i}" / f"r{rank}_{name}", rank, solver, seed)
                    d[f"sar{rank}/{name}"] = ev(p)
            toy["downstream"][f"rl{i}"] = d
            print(f"toy rl{i} done", flush=True)
            save()
    if "smollm2" in a.parts and a.smol_base and a.smol_tuned:
        test = read_jsonl(a.smol_test)[:a.smol_test_n]
        smol: dict = {"base": a.smol_base, "tuned": a.smol_tuned, "ranks": a.smol_ranks}
        res["smollm2"] = smol
        full = pair_matrices(a.smol_base, a.smol_tuned, a.smol_ranks, a.smol_layer_every)
        smol["matrix_layers"] = f"every {a.smol_layer_every}-th of 30 layers (all 7 targets each)"
        smol["matrices"] = {r: v["summary"] for r, v in full.items()}
        smol["per_matrix_example"] = {r: dict(list(v["per_matrix"].items())[:7]) for r, v in full.items()}
        print("smol matrices done", flush=True)
        save()
        d = {"base": smol_eval(a.smol_base, test), "tuned": smol_eval(a.smol_tuned, test)}
        smol["downstream"] = d  # filled in as it goes (saved after every model)
        for rank in a.smol_ranks:
            for name, solver, seed in DOWN_VARIANTS[:1 + a.smol_downstream_seeds]:
                p = extract_edited(a.smol_base, a.smol_tuned, work / "smol" / f"r{rank}_{name}", rank, solver, seed)
                d[f"sar{rank}/{name}"] = smol_eval(p, test)
                print(f"smol {rank} {name}: {d[f'sar{rank}/{name}']}", flush=True)
                save()
    if "synthetic" in a.parts:
        res["synthetic"] = synthetic()
        save()
    print(json.dumps({k: v for k, v in res.items() if k in ("toy", "smollm2")}, indent=1, default=str)[:3000])


if __name__ == "__main__":
    main()
