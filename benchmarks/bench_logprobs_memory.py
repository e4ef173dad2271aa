"""Peak memory of per-token log-probs: chunked (shiftkit.logprobs) vs full [B, T, V] logits.

Each measurement runs in a fresh child process on 1 CPU thread: it builds the inputs (hidden states
[B, T, H] and a head [V, H] with grad, SmolLM2-135M's H=576 and V=49152), resets the kernel's
peak-RSS counter (``/proc/self/clear_refs``), runs forward + backward once, and reports
``VmHWM - VmRSS before`` (the memory the computation itself added, including the [V, H] weight
gradient: 108 MB here) and the wall time. glibc's malloc is run with a fixed mmap threshold
(``MALLOC_MMAP_THRESHOLD_=65536``) so freed tensors return to the OS and RSS tracks live tensors
(with glibc's default dynamic threshold, freed chunk-sized blocks stay in the heap and the peak
depends on allocation history, not on what is alive).

Ops: ``sampled`` = log-prob of the sampled token and its gradient (every loop's update);
``full_vocab`` = Direct-OPD's full-vocabulary loss with student, teacher and reference heads.
``unchunked`` is what the loops do today (shiftkit.losses / advantages on full logits).
``update`` = one policy-gradient backward of a small Qwen3 (2 layers, H=128) with the real 49k
vocabulary on ``R`` rows of 16 prompt + 128 completion tokens: today's path (whole batch,
``forward_logits``) vs ``shiftkit.microbatch`` micro-batches of <= ``--token-budget`` tokens with
the chunked head; run at two row counts to show the micro-batched peak does not grow with the batch.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_logprobs_memory.py          # B=2, T=512
    -> benchmarks/results/logprobs_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "logprobs_memory.json"


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def child_update(mode: str, R: int, V: int, chunk: int, budget: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from shiftkit import logprobs as LP
    from shiftkit import losses
    from shiftkit import microbatch as MB
    from shiftkit.models import TinyModelSpec, make_tiny_model
    from shiftkit.sampling import forward_logits, token_logprobs

    model = make_tiny_model(TinyModelSpec(hidden_size=128, num_hidden_layers=2, intermediate_size=384,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                          max_position_embeddings=512), vocab_size=V, seed=0)
    g = torch.Generator().manual_seed(0)
    P, T = 16, 128
    p_ids, p_mask = torch.randint(3, V, (R, P), generator=g), torch.ones(R, P, dtype=torch.long)
    c_ids = torch.randint(3, V, (R, T), generator=g)
    lens = torch.randint(T // 2, T + 1, (R,), generator=g)
    c_mask = (torch.arange(T)[None] < lens[:, None]).long()
    adv = torch.randn(R, T, generator=g)
    n_tok, _ = MB.global_counts(c_mask)
    Path("/proc/self/clear_refs").write_text("5")
    before = _rss_kb("VmRSS")
    t0 = time.time()
    if mode == "unchunked":
        lp = token_logprobs(forward_logits(model, p_ids, p_mask, c_ids, c_mask), c_ids)
        losses.policy_loss(lp, lp.detach(), adv, c_mask, num_tokens=n_tok)[0].backward()
        n_mb = 1
    else:
        mbs = MB.micro_batches(p_mask, c_mask, budget)

        def loss_fn(mb):
            head = LP.model_head(model, mb.prompt(p_ids), mb.prompt(p_mask), mb.completion(c_ids), mb.completion(c_mask))
            lp = LP.token_logprobs(head, mb.completion(c_ids), chunk)
            return losses.policy_loss(lp, lp.detach(), mb.completion(adv), mb.completion(c_mask), num_tokens=n_tok)[0]

        for mb in MB.accumulating(model, mbs):
            (loss_fn(mb) * mb.scale).backward()
        n_mb = len(mbs)
    secs = time.time() - t0
    return {"op": "update", "mode": mode, "rows": R, "micro_batches": n_mb,
            "added_peak_mb": round((_rss_kb("VmHWM") - before) / 1024, 1), "seconds": round(secs, 2)}


def child(op: str, mode: str, B: int, T: int, H: int, V: int, chunk: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from shiftkit import logprobs as LP
    from shiftkit import losses

    try:
        from shiftkit import advantages as A
    except ImportError:
        A = losses
    g = torch.Generator().manual_seed(0)
    heads = []
    for i in range(3 if op == "full_vocab" else 1):
        h = torch.randn(B, T, H, generator=g).requires_grad_(i == 0)
        w = (torch.randn(V, H, generator=g) * 0.02).requires_grad_(i == 0)
        heads.append(LP.Head(h, w))
    ids_BT = torch.randint(0, V, (B, T), generator=g)
    mask_BT = torch.ones(B, T)
    adv_BT = torch.randn(B, T, generator=g)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _rss_kb("VmRSS")
    t0 = time.time()
    if op == "sampled":
        if mode == "chunked":
            lp = LP.token_logprobs(heads[0], ids_BT, chunk)
        else:
            lp = LP.logprobs_from_logits(LP.logits_of(heads[0]).view(B, T, V), ids_BT.unsqueeze(-1)).squeeze(-1)
        loss = losses.policy_loss(lp, lp.detach(), adv_BT, mask_BT)[0]
    else:
        s, t, r = heads
        if mode == "chunked":
            loss = losses.direct_opd_full_vocab_loss(s, t, r, mask_BT, chunk=chunk)[0]
        else:
            sl = LP.logits_of(s).view(B, T, V)
            with torch.no_grad():
                tl, rl = LP.logits_of(t).view(B, T, V), LP.logits_of(r).view(B, T, V)
            adv, _, _ = A.direct_opd_full_vocab(sl.detach(), tl, rl)
            del tl, rl
            lp = sl.log_softmax(-1)
            loss = losses.candidate_policy_loss(lp, lp.detach(), adv, mask_BT)[0]
    loss.backward()
    secs = time.time() - t0
    peak = _rss_kb("VmHWM")
    return {"op": op, "mode": mode, "added_peak_mb": round((peak - before) / 1024, 1), "seconds": round(secs, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--T", type=int, default=512)
    ap.add_argument("--H", type=int, default=576)
    ap.add_argument("--V", type=int, default=49152)
    ap.add_argument("--chunk", type=int, default=128, help="positions per chunk")
    ap.add_argument("--update-rows", type=int, nargs="+", default=[8, 32], help="rows for the model-update op")
    ap.add_argument("--token-budget", type=int, default=1152, help="micro-batch token budget of the update op")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--child", nargs=2, metavar=("OP", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if min(*a.B, a.T, a.H, a.V, a.chunk) <= 0:
        print("error: --B, --T, --H, --V and --chunk must be positive", file=sys.stderr)
        return 2
    if a.child:
        if a.child[0] == "update":
            print(json.dumps(child_update(a.child[1], a.update_rows[0], a.V, a.chunk, a.token_budget)))
        else:
            print(json.dumps(child(*a.child, a.B[0], a.T, a.H, a.V, a.chunk)))
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "MALLOC_MMAP_THRESHOLD_": "65536"}
    rows = []
    for B in a.B:
        for op in ("sampled", "full_vocab"):
            for mode in ("unchunked", "chunked"):
                cmd = [sys.executable, __file__, "--B", str(B), "--T", str(a.T), "--H", str(a.H), "--V", str(a.V),
                       "--chunk", str(a.chunk), "--child", op, mode]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                rows.append({"B": B, **json.loads(out.stdout.strip().splitlines()[-1])})
                print(rows[-1], flush=True)
    for R in a.update_rows:
        for mode in ("unchunked", "chunked"):
            cmd = [sys.executable, __file__, "--V", str(a.V), "--chunk", str(a.chunk), "--update-rows", str(R),
                   "--token-budget", str(a.token_budget), "--child", "update", mode]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    by = {(r["B"], r["op"], r["mode"]): r for r in rows if "B" in r}
    upd = {(r["rows"], r["mode"]): r for r in rows if r["op"] == "update"}
    res = {
        "setting": {"B": a.B, "T": a.T, "H": a.H, "V": a.V, "chunk_positions": a.chunk, "threads": 1,
                    "one_BTV_fp32_mb": {B: round(B * a.T * a.V * 4 / 2**20, 1) for B in a.B},
                    "one_chunk_V_fp32_mb": round(a.chunk * a.V * 4 / 2**20, 1),
                    "weight_grad_VH_fp32_mb": round(a.V * a.H * 4 / 2**20, 1)},
        "measure": "peak RSS added by forward+backward (VmHWM after minus VmRSS before, MB), fresh process each, "
                   "MALLOC_MMAP_THRESHOLD_=65536",
        "rows": rows,
        "ratio_unchunked_over_chunked": {f"{op}_B{B}": round(by[(B, op, "unchunked")]["added_peak_mb"]
                                                             / max(1e-9, by[(B, op, "chunked")]["added_peak_mb"]), 2)
                                         for B in a.B for op in ("sampled", "full_vocab")},
        "update_unchunked_over_microbatched": {f"rows{R}": round(upd[(R, "unchunked")]["added_peak_mb"]
                                                                 / max(1e-9, upd[(R, "chunked")]["added_peak_mb"]), 2)
                                               for R in a.update_rows},
        "command": "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_logprobs_memory.py "
                   f"--B {' '.join(map(str, a.B))} --T {a.T} --H {a.H} --V {a.V} --chunk {a.chunk} "
                   f"--update-rows {' '.join(map(str, a.update_rows))} --token-budget {a.token_budget}",
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["ratio_unchunked_over_chunked"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
