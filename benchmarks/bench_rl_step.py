"""Time per GRPO step: shiftkit vs TRL's GRPOTrainer, side by side in one run.

Same tiny model (the toy world's weak model if --model is given, else a fresh WEAK_SPEC Qwen3),
same char tokenizer, same prompts (add+mul), same batch (prompts x generations), same max
completion length, temperature 1, same loss (token-mean "DAPO" aggregation, group-std advantages,
no KL, one update per batch). Each repeat runs both for --steps steps, alternating which goes
first; we report per-step wall time min/median/max over all measured steps (the first step of
every run is a warm-up and is dropped) and the ratio of medians.

    pip install -e '.[bench]'
    python benchmarks/bench_rl_step.py --model runs/demo/world/weak/final --repeats 3 --steps 6
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shiftkit.io import atomic_write_json, read_jsonl  # noqa: E402
from shiftkit.models import WEAK_SPEC, load_model_and_tokenizer, make_char_tokenizer, make_tiny_model, save_model  # noqa: E402
from shiftkit.tasks import Mixture  # noqa: E402


def shiftkit_steps(model_dir: str, steps: int, prompts: int, gens: int, max_new: int, seed: int) -> list[float]:
    from shiftkit.rl import GRPOConfig, run_grpo

    with tempfile.TemporaryDirectory() as d:
        run_grpo(GRPOConfig(model=model_dir, out=f"{d}/run", tasks=["add", "mul"], steps=steps,
                            prompts_per_step=prompts, group_size=gens, max_new_tokens=max_new, seed=seed,
                            eval_every=0, progress=False, lr=6e-5))
        rows = read_jsonl(f"{d}/run/metrics.jsonl")
    return [r["step_time"] for r in rows if "step_time" in r]


def trl_steps(model_dir: str, steps: int, prompts: int, gens: int, max_new: int, seed: int) -> list[float]:
    import transformers
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tok = load_model_and_tokenizer(model_dir)
    mix = Mixture(["add", "mul"])
    rng = random.Random(seed)
    probs = [mix.sample(rng, "train") for _ in range(prompts * (steps + 1))]
    ds = Dataset.from_list([{"prompt": p.prompt, "answer": p.answer, "domain": p.domain} for p in probs])
    by_prompt = {p.prompt: p for p in probs}

    def reward(prompts, completions, **kw):
        return [mix.reward(by_prompt[p], c) for p, c in zip(prompts, completions)]

    times: list[float] = []

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    with tempfile.TemporaryDirectory() as d:
        cfg = GRPOConfig(output_dir=d, use_cpu=True, per_device_train_batch_size=prompts * gens,
                         num_generations=gens, max_completion_length=max_new, temperature=1.0, top_p=1.0,
                         learning_rate=6e-5, beta=0.0, loss_type="dapo", scale_rewards="group",
                         num_iterations=1, max_steps=steps, logging_steps=10**6, save_strategy="no",
                         report_to=[], seed=seed, disable_tqdm=True, dataloader_num_workers=0)
        tr = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok,
                         callbacks=[Timer()])
        tr.train()
    return times


def summarize(xs: list[float]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="HF model dir (default: a fresh WEAK_SPEC model)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/rl_step.json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tmp = None
    model_dir = a.model
    if not model_dir:
        tmp = tempfile.TemporaryDirectory()
        tok = make_char_tokenizer()
        model_dir = f"{tmp.name}/weak"
        save_model(make_tiny_model(WEAK_SPEC, len(tok)), tok, model_dir)
    ours, theirs = [], []
    for r in range(a.repeats):
        order = [("shiftkit", shiftkit_steps, ours), ("trl", trl_steps, theirs)]
        if r % 2:
            order.reverse()
        for name, fn, acc in order:
            t = fn(model_dir, a.steps, a.prompts, a.generations, a.max_new_tokens, seed=r)
            acc += t[1:]  # drop the warm-up step
            print(f"repeat {r} {name}: median step {statistics.median(t[1:]):.3f} s", flush=True)
    res = {
        "what": "seconds per GRPO step (sample + reward + loss + backward + optimizer step)",
        "model": a.model or "fresh WEAK_SPEC (untrained)",
        "batch": {"prompts": a.prompts, "generations": a.generations, "max_new_tokens": a.max_new_tokens},
        "threads": a.threads, "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "shiftkit": summarize(ours), "trl": summarize(theirs),
        "speedup_median": statistics.median(theirs) / statistics.median(ours),
        "command": "python benchmarks/bench_rl_step.py " + " ".join(sys.argv[1:]),
    }
    try:
        import trl

        res["trl_version"] = trl.__version__
    except ImportError:
        pass
    atomic_write_json(a.out, res)
    print(json.dumps({k: res[k] for k in ("shiftkit", "trl", "speedup_median")}, indent=1))


if __name__ == "__main__":
    main()
