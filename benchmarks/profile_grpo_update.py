"""Where a GRPO step's time goes (the companion of ``bench_rl_step.py``), and one measured remedy.

1. ``torch.profiler`` of shiftkit's update (forward + backward + AdamW on one 16x8 rollout batch) and of
   its sampler, and of one TRL ``GRPOTrainer`` step at matched settings (fp32, no checkpointing): the
   top operators by self CPU time, with input shapes.
2. Padding: the same update as one padded batch vs length-sorted micro-batches (4 and 8) with the same
   token-mean normalisation (so the summed gradient is the same up to fp32 rounding: the relative
   difference is reported), timed interleaved, median of ``--repeats``.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/profile_grpo_update.py \\
        --model /tmp/h1/world/weak/final
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiftkit.io import atomic_write_json  # noqa: E402
from shiftkit.models import load_model_and_tokenizer  # noqa: E402
from shiftkit.sampling import forward_logits, sample, token_logprobs  # noqa: E402
from shiftkit.tasks import Mixture  # noqa: E402


def top_ops(prof, n: int = 12) -> list[dict]:
    ev = prof.key_averages(group_by_input_shape=True)
    total = sum(e.self_cpu_time_total for e in ev) or 1.0
    rows = sorted(ev, key=lambda e: -e.self_cpu_time_total)[:n]
    return [{"op": e.key, "shapes": str(e.input_shapes)[:120], "calls": e.count,
             "self_cpu_share": e.self_cpu_time_total / total} for e in rows]


def op_shares(prof) -> dict:
    ev = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in ev) or 1.0
    cats = {"matmul (mm/bmm/addmm)": ("aten::mm", "aten::bmm", "aten::addmm"),
            "attention (sdpa)": ("_scaled_dot_product",),
            "elementwise (mul/add/silu/pow/neg/div/copy)": ("aten::mul", "aten::add", "aten::silu", "aten::pow",
                                                            "aten::neg", "aten::div", "aten::copy_", "aten::rsqrt"),
            "reductions (sum/mean)": ("aten::sum", "aten::mean"),
            "cat/index/slice": ("aten::cat", "aten::index", "aten::slice")}
    out = {k: 0.0 for k in cats}
    for e in ev:
        for k, keys in cats.items():
            if any(s in e.key for s in keys):
                out[k] += e.self_cpu_time_total / total
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/rl_step_profile.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    from torch.profiler import ProfilerActivity, profile

    model, tok = load_model_and_tokenizer(a.model)
    mix = Mixture(["add", "mul"])
    rng = random.Random(0)
    probs = [mix.sample(rng, "train") for _ in range(16)]
    prompts = [p.prompt for p in probs for _ in range(8)]

    def roll_out():
        return sample(model, tok, prompts, max_new_tokens=48, temperature=1.0, top_p=1.0, row_seeds=list(range(128)))

    roll = roll_out()
    P, PM, C, M = roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT
    adv = torch.randn(128, generator=torch.Generator().manual_seed(0))
    ntok = M.sum()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-5, foreach=True)

    def loss_of(idx):
        m = M[idx]
        L = int(m.sum(1).max())
        lp = token_logprobs(forward_logits(model, P[idx], PM[idx], C[idx][:, :L], m[:, :L]), C[idx][:, :L])
        return -(lp * adv[idx, None] * m[:, :L]).sum() / ntok

    def grads():
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    def update(nb: int = 1, step: bool = False):
        model.zero_grad(set_to_none=True)
        for chunk in (torch.argsort(M.sum(1)).chunk(nb) if nb > 1 else [torch.arange(128)]):
            loss_of(chunk).backward()
        if step:
            opt.step()

    update(1)
    g1 = grads().clone()
    res: dict = {"model": a.model, "batch": "16 prompts x 8 samples, max 48 new tokens", "threads": 1,
                 "command": "python benchmarks/profile_grpo_update.py " + " ".join(sys.argv[1:]),
                 "completion_tokens": int(ntok), "padded_completion_positions": int(M.numel()),
                 "prompt_positions": int(P.numel())}
    pad = {}
    for nb in (4, 8):
        update(nb)
        pad[f"micro_batches_{nb}_grad_rel_diff"] = float((grads() - g1).norm() / g1.norm())
    times: dict[str, list[float]] = {"one_padded_batch": [], "length_sorted_4": [], "length_sorted_8": []}
    for _ in range(a.repeats):
        for k, nb in (("one_padded_batch", 1), ("length_sorted_4", 4), ("length_sorted_8", 8)):
            s = time.process_time()
            update(nb)
            times[k].append(time.process_time() - s)
    pad["cpu_s_median"] = {k: statistics.median(v) for k, v in times.items()}
    pad["saving_4"] = 1 - pad["cpu_s_median"]["length_sorted_4"] / pad["cpu_s_median"]["one_padded_batch"]
    pad["saving_8"] = 1 - pad["cpu_s_median"]["length_sorted_8"] / pad["cpu_s_median"]["one_padded_batch"]
    res["padding"] = pad

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as pr:
        update(1, step=True)
    res["shiftkit_update"] = {"shares": op_shares(pr), "top_ops": top_ops(pr)}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as pr:
        roll_out()
    res["shiftkit_sample"] = {"shares": op_shares(pr), "top_ops": top_ops(pr)}

    if not a.skip_trl:
        import transformers
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        tmodel, _ = load_model_and_tokenizer(a.model)
        tp = [mix.sample(rng, "train") for _ in range(16 * 4)]
        ds = Dataset.from_list([{"prompt": p.prompt} for p in tp])
        byp = {p.prompt: p for p in tp}

        def reward(prompts, completions, **kw):
            return [mix.reward(byp[p], c) for p, c in zip(prompts, completions)]

        box: dict = {}

        class Prof(transformers.TrainerCallback):
            def on_step_begin(self, args, st, c, **kw):
                if st.global_step == 2:
                    box["p"] = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
                    box["p"].__enter__()

            def on_step_end(self, args, st, c, **kw):
                if "p" in box and "done" not in box:
                    box["p"].__exit__(None, None, None)
                    box["done"] = True

        import tempfile

        with tempfile.TemporaryDirectory() as d:
            cfg = GRPOConfig(output_dir=d, use_cpu=True, per_device_train_batch_size=128, num_generations=8,
                             max_completion_length=48, temperature=1.0, top_p=1.0, learning_rate=6e-5, beta=0.0,
                             loss_type="dapo", scale_rewards="group", max_steps=3, logging_steps=10**6,
                             save_strategy="no", report_to=[], seed=0, disable_tqdm=True, bf16=False,
                             gradient_checkpointing=False)
            tr = GRPOTrainer(model=tmodel, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok,
                             callbacks=[Prof()])
            tr.train()
        res["trl_step"] = {"shares": op_shares(box["p"]), "top_ops": top_ops(box["p"]),
                           "note": "one whole TRL step (generation + scoring + update), matched settings"}
    res["load_avg_at_end"] = os.getloadavg()
    atomic_write_json(a.out, res)
    print({k: res[k] for k in ("padding",)})
    print({k: res[k]["shares"] for k in ("shiftkit_update", "shiftkit_sample", "trl_step") if k in res})


if __name__ == "__main__":
    main()
