"""Decoding speed on a real model against the machine's memory-bandwidth floor, side by side in one run.

SmolLM2-135M-Instruct (``shiftkit model import-gguf smollm2 --out DIR``), fp32, one thread,
``OMP_WAIT_POLICY=PASSIVE``; ``--rows`` prompts (default 8) sampled at temperature 1, top-p 1, for
``--max-new-tokens`` (default 64) tokens. Plain-text story openings are the prompts (no chat template), so
that no row stops early and every side decodes the same number of tokens (checked, and recorded).

Sides (each repeat runs all, rotating the order, so machine load hits them alike):

* ``shiftkit_fused``: ``shiftkit.sampling.sample`` as the loops call it (``decode=auto``: the fused decoder
  with the preallocated KV cache and MKL-packed weights);
* ``shiftkit_generic``: the same call with ``decode=generic``, the sampler before the fused decoder (the
  model's own forward per token on a ``DynamicCache``);
* ``hf_generate``: transformers' ``model.generate`` (``do_sample=True, top_k=0, top_p=1, temperature=1,
  min_new_tokens = max_new_tokens``), which is how TRL's GRPOTrainer decodes without vLLM: the peer
  (``ratio`` = its median / ``shiftkit_fused``'s median, whole call).

The floor. A decode step reads every weight once (the tied embedding as the output head) plus the KV
cache so far; ``floor_s = sum over decode steps of (weight bytes + KV bytes) / copy bandwidth``, the
bandwidth measured in the same run before every repeat (one thread copying a 512 MiB buffer, bytes read
+ written per second, STREAM's count, so the floor is a lower bound). ``ratio_to_floor`` = measured decode
seconds (the prompt's forward and the weight packing excluded, both reported) / floor seconds: 1.0
would be the machine's limit. Tokens/s count generated tokens over the whole call.

    python benchmarks/bench_decode.py --model /work/models/smollm2 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import copy_bandwidth, load_avg, provenance, single_thread, spread  # noqa: E402

STORIES = ["Once upon a time, in a small village by the sea, there lived an old fisherman who",
           "The history of the printing press begins in the fifteenth century, when",
           "Dear diary, today was the strangest day of my life. When I woke up,",
           "In the year 2150, the first colony on Mars faced a problem nobody had predicted:",
           "The recipe for my grandmother's apple pie starts with",
           "Chapter one. The detective looked at the empty room and",
           "A long time ago, the mountains were home to a tribe of giants who",
           "The train left the station at midnight, and the only passenger was",
           "Scientists have long wondered why the ocean is salty. The answer",
           "When the king died, his three daughters gathered in the great hall and"]


def weight_bytes(model) -> int:
    """Bytes one decode step reads: every parameter once, but of an untied input embedding only the rows it
    looks up (nothing, to this precision)."""
    seen, total = set(), 0
    emb = model.get_input_embeddings().weight
    tied = model.get_output_embeddings().weight is emb
    for p in model.parameters():
        if id(p) in seen or (p is emb and not tied):
            continue
        seen.add(id(p))
        total += p.numel() * p.element_size()
    return total


def kv_bytes(model, rows: int, positions: int) -> int:
    c = model.config
    return 2 * c.num_hidden_layers * rows * c.num_key_value_heads * positions * c.head_dim * 4


def run_shiftkit(model, tok, prompts, max_new, decode, seeds):
    from shiftkit.sampling import sample

    t0 = time.perf_counter()
    r = sample(model, tok, prompts, max_new_tokens=max_new, row_seeds=seeds, decode=decode)
    dt = time.perf_counter() - t0
    P = r.prompt_ids_BP.shape[1]
    # KV positions read at each decode step: the prompt + the tokens so far, for every row in the batch
    kv = sum(kv_bytes(model, len(prompts), P + 1 + s) for s in range(r.info["steps"]))
    return {"total_s": dt, "decode_s": r.info["decode_s"], "prefill_s": r.info["prefill_s"] - r.info["pack_s"],
            "pack_s": r.info["pack_s"], "tokens": int(r.completion_mask_BT.sum()), "steps": r.info["steps"],
            "kv_bytes": kv, "decoder": r.info["decoder"], "matmul": r.info["matmul"]}


def run_hf(model, tok, prompts, max_new, seed):
    import torch

    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=max_new,
                             min_new_tokens=max_new, pad_token_id=tok.pad_token_id)
    dt = time.perf_counter() - t0
    gen = out[:, enc["input_ids"].shape[1]:]
    return {"total_s": dt, "tokens": int(gen.numel())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="SmolLM2 directory (shiftkit model import-gguf smollm2 --out DIR)")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/decode_smollm2.json")
    a = ap.parse_args()
    single_thread(1)
    import torch
    import transformers

    from shiftkit.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(a.model)
    model.eval()
    tok.padding_side = "left"
    prompts = [STORIES[i % len(STORIES)] for i in range(a.rows)]
    seeds = list(range(a.rows))
    W = weight_bytes(model)
    sides = {"shiftkit_fused": lambda r: run_shiftkit(model, tok, prompts, a.max_new_tokens, "auto", seeds),
             "shiftkit_generic": lambda r: run_shiftkit(model, tok, prompts, a.max_new_tokens, "generic", seeds)}
    if not a.no_hf:
        sides["hf_generate"] = lambda r: run_hf(model, tok, prompts, a.max_new_tokens, r)
    got: dict[str, list[dict]] = {k: [] for k in sides}
    bws, loads = [], [load_avg()]
    run_shiftkit(model, tok, prompts, 4, "auto", seeds)  # warm-up (allocator, MKL)
    names = list(sides)
    for r in range(a.repeats):
        bw = copy_bandwidth()
        bws.append(bw)
        for name in names[r % len(names):] + names[: r % len(names)]:
            x = sides[name](r)
            x["copy_bw"] = bw
            if "decode_s" in x:
                x["floor_s"] = (x["steps"] * W + x["kv_bytes"]) / bw
                x["ratio_to_floor"] = x["decode_s"] / x["floor_s"]
            got[name].append(x)
            print(f"repeat {r} {name}: {x['total_s']:.2f} s, {x['tokens']} tokens"
                  + (f", decode {x['decode_s']:.2f} s = {x['ratio_to_floor']:.2f}x floor" if "decode_s" in x else ""),
                  flush=True)
        loads.append(load_avg())

    def summary(rows):
        out = {k: spread([x[k] for x in rows]) for k in ("total_s", "decode_s", "prefill_s", "pack_s", "floor_s",
                                                           "ratio_to_floor") if k in rows[0]}
        out["tokens"] = sorted({x["tokens"] for x in rows})
        out["tokens_per_s"] = spread([x["tokens"] / x["total_s"] for x in rows])
        if "decode_s" in rows[0]:
            out["decode_tokens_per_s"] = spread([(x["tokens"] - len(prompts)) / x["decode_s"] for x in rows])
            out["floor_tokens_per_s"] = spread([(x["tokens"] - len(prompts)) / x["floor_s"] for x in rows])
            out["decoder"], out["matmul"] = rows[0]["decoder"], rows[0]["matmul"]
        return out

    med = {k: statistics.median(x["total_s"] for x in v) for k, v in got.items()}
    fused = summary(got["shiftkit_fused"])
    res = {
        "what": "sampling 8 rows x 64 new tokens on SmolLM2-135M-Instruct: seconds per call, and decode seconds "
                "against the memory-bandwidth floor",
        **provenance(),
        "matched": {"model": "SmolLM2-135M-Instruct (GGUF import), fp32", "rows": a.rows,
                    "max_new_tokens": a.max_new_tokens, "temperature": 1.0, "top_p": 1.0, "top_k": "off",
                    "threads": 1, "OMP_WAIT_POLICY": "PASSIVE", "prompts": "plain-text story openings, left-padded",
                    "kv_cache": "on, every side", "tokens": {k: sorted({x["tokens"] for x in v}) for k, v in got.items()}},
        "peer": None if a.no_hf else {"name": "transformers generate (TRL GRPOTrainer's decoding without vLLM)",
                                      "version": transformers.__version__},
        "weight_bytes_per_step": W,
        "copy_bandwidth_GBps": spread([b / 1e9 for b in bws]),
        "floor_method": "sum over decode steps of (weight bytes + KV-cache bytes read) / copy bandwidth "
                        "(bytes read + written per second, one thread, measured before each repeat)",
        "sides": {k: summary(v) for k, v in got.items()},
        "ratio_to_floor": fused["ratio_to_floor"]["median"],
        "ratio_fused_vs_generic": med["shiftkit_generic"] / med["shiftkit_fused"],
        "load_avg": loads,
        "repeats": a.repeats,
        "runs": got,
    }
    if not a.no_hf:
        res["ratio"] = med["hf_generate"] / med["shiftkit_fused"]
        res["ratio_note"] = "transformers generate median / shiftkit (fused) median, whole call; > 1: shiftkit faster"
    else:
        res["peer_note"] = "run with --no-hf: no peer side"
    from shiftkit.io import atomic_write_json

    atomic_write_json(a.out, res)
    print(json.dumps({k: res.get(k) for k in ("ratio", "ratio_fused_vs_generic", "ratio_to_floor")} |
                     {k: round(v["total_s"]["median"], 2) for k, v in res["sides"].items()}, indent=1))


if __name__ == "__main__":
    main()
