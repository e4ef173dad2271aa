"""A SMALL learning measurement of the kernel grammar with the real kernel environment's reward (verify mode).

One seed, a handful of GRPO steps: a smoke-sized look at whether the environment's -1/+1 verdicts move a
0.23M policy, not the issue-18 experiment (that is ``shiftkit experiment agent-kernels``: 3 seeds, profile
mode, single- and multi-turn). Pipeline: behaviour cloning of uniformly random valid compositions (every
prompt, train and held-out; no reward in it), then ``shiftkit rl`` (:func:`shiftkit.rl.run_grpo`) with
``reward=shiftkit.agent.kernel_grammar:grammar_verify_reward`` on the train problems, the environment in
this process. Held-out: ``k`` sampled answers per held-out problem (temperature 1, fixed seeds) before and
after, judged by the same reward. ``--kl-coef`` adds GRPO's k3 KL to the starting (cloned) policy
(:attr:`shiftkit.rl.GRPOConfig.kl_coef`; 0 = none, the default).

    python benchmarks/agent_kernel_rl_small.py --seed 0 --steps 12 --out runs/agent_kernel_rl_small
    python benchmarks/agent_kernel_rl_small.py --seed 0 --steps 10 --kl-coef 0.1 --out runs/akrl_kl_s0 \
        --results benchmarks/results/agent_kernel_rl_kl_seed0.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from shiftkit.agent import kernel_grammar as KG
from shiftkit.io import atomic_write_json, read_jsonl
from shiftkit.recipes.agent_kernels import _base, clone, single_turn_rows, write_rows

TRAIN = ["g_ew_clamp_1024x1024", "g_red_sumsq_1024x1024"]
HELDOUT = ["g_ew_relu6_1024x768", "g_red_sumrelu_1024x768"]
REWARD = "shiftkit.agent.kernel_grammar:grammar_verify_reward"


def evaluate(model, tok, names: list[str], k: int, env, seed: int) -> dict:
    from shiftkit.sampling import sample

    model.eval()
    prompts = [KG.prompt_for(KG.PROBLEMS[n]) for n in names for _ in range(k)]
    with torch.no_grad():
        roll = sample(model, tok, prompts, max_new_tokens=32, temperature=1.0,
                      row_seeds=[seed * 7919 + 500_000 + i for i in range(len(prompts))])
    model.train()
    pn = [n for n in names for _ in range(k)]
    logged: dict = {}
    r = KG.grammar_verify_reward(prompts, roll.texts, pn, env=env, log_extra=lambda key, v: logged.update({key: v}))
    ok = [x for x in r if x is not None]
    reasons = [e.get("reason", "").split(":")[0] for e in logged["kernel"]]
    return {"n": len(r), "reward": sum(ok) / len(ok) if ok else float("nan"), "unscorable": len(r) - len(ok),
            "frac_+1": sum(x == 1.0 for x in ok) / max(1, len(ok)), "frac_-1": sum(x == -1.0 for x in ok) / max(1, len(ok)),
            "frac_format_error": sum(x == "format_error" for x in reasons) / max(1, len(r)),
            "frac_variant_exact": sum(t.split()[4:5] == ["exact"] for t in roll.texts) / max(1, len(r))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--kl-coef", type=float, default=0.0, help="k3 KL to the starting policy (GRPOConfig.kl_coef; 0 = none)")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--sft-rows", type=int, default=2000)
    ap.add_argument("--sft-steps", type=int, default=300)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--out", default="runs/agent_kernel_rl_small")
    ap.add_argument("--results", default="benchmarks/results/agent_kernel_rl_small_seed0.json")
    a = ap.parse_args()
    from shiftkit.config import check_ranges
    from shiftkit.kernels.envclient import LocalKernelEnv
    from shiftkit.models import load_model_and_tokenizer, save_model
    from shiftkit.rl import GRPOConfig, run_grpo

    torch.set_num_threads(1)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    env = LocalKernelEnv()  # held-out evaluation (its verdict cache: one verify per distinct composition)
    sft = out / "sft"
    if not (sft / "config.json").is_file():
        model, tok = _base(a.seed)
        loss = clone(model, tok, single_turn_rows(tok, TRAIN + HELDOUT, a.sft_rows, a.seed), a.sft_steps, 3e-3, a.seed)
        save_model(model, tok, sft, extra_files={"clone.json": json.dumps({"final_loss": loss})})
    before = evaluate(*load_model_and_tokenizer(sft), HELDOUT, a.k, env, a.seed)
    print(f"held-out before: {before}", file=sys.stderr, flush=True)
    data = write_rows(out / "train.jsonl", TRAIN)
    cfg = GRPOConfig(model=str(sft), out=str(out / "rl"), data=data, reward=[REWARD], steps=a.steps,
                     prompts_per_step=len(TRAIN), group_size=a.group_size, max_new_tokens=32, lr=a.lr,
                     kl_coef=a.kl_coef, eval_every=0, samples_every=max(1, a.steps // 3), seed=a.seed, threads=1,
                     progress=True, overwrite=True)
    check_ranges(cfg)  # kl_coef >= 0, lr > 0, ...: run_grpo called directly checks neither (from_dict does)
    cfg.validate()
    rl = run_grpo(cfg)
    after = evaluate(*load_model_and_tokenizer(rl["out"]), HELDOUT, a.k, env, a.seed)
    print(f"held-out after: {after}", file=sys.stderr, flush=True)
    curve = [r for r in read_jsonl(out / "rl" / "metrics.jsonl") if "loss" in r]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True).stdout.strip())
    res = {
        "command": " ".join(["python benchmarks/agent_kernel_rl_small.py", *sys.argv[1:]]),
        "commit": commit + ("-dirty" if dirty else ""),
        "what": "SMALL single-turn GRPO on the kernel grammar with the real environment's verify reward (-1/+1), "
                "one seed; not the issue-18 experiment (shiftkit experiment agent-kernels, 3 seeds, profile mode)",
        "seeds": [a.seed],
        "reward": REWARD,
        "problems": {"train": TRAIN, "heldout": HELDOUT},
        "matched": {"before_vs_after": "same held-out prompts, sample seeds, temperature 1, max_new_tokens 32, reward",
                    "threads": 1, "k_per_heldout_problem": a.k},
        "peer": None,
        "peer_note": "a learning measurement, not a timing comparison: no peer runs the kernel grammar",
        "config": {"steps": a.steps, "lr": a.lr, "kl_coef": a.kl_coef, "group_size": a.group_size, "prompts_per_step": len(TRAIN),
                   "sft_rows": a.sft_rows, "sft_steps": a.sft_steps, "kernel_mode": "verify"},
        "reward_before": before["reward"], "reward_after": after["reward"],
        "table": {"before": before, "after": after},
        "train_curve": [{"step": r["step"], "reward": r["reward"], "frac_groups_with_signal": r.get("frac_groups_with_signal"),
                         "kl": r.get("kl")} for r in curve],
        "seconds": round(time.time() - t0, 1),
        "load_avg_end": list(os.getloadavg()),
        "note": "one seed resolves nothing: the before/after difference is within what a different seed or sample set "
                "could give; random valid compositions are exact (correct) 1/3 of the time, so verify mode's signal is "
                "mostly 'choose variant=exact'",
    }
    atomic_write_json(Path(a.results), res)
    print(json.dumps({k: res[k] for k in ("reward_before", "reward_after", "seconds")}), flush=True)


if __name__ == "__main__":
    main()
