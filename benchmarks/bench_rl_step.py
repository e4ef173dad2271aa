"""Time per GRPO step: shiftkit vs TRL's GRPOTrainer at matched settings (and TRL's defaults), in one run.

Same trained tiny model (``--model``: the toy world's weak SFT model), same char tokenizer, same prompts
(add+mul), same batch (``--prompts`` x ``--generations``), same max completion length, temperature 1,
top-p 1, same loss (token-mean "DAPO" aggregation, group-std advantages, no KL, one update per batch,
grad-norm clip 1.0, AdamW), same thread count (``--threads``, default 1) and ``OMP_WAIT_POLICY=PASSIVE``
(the script re-executes itself with both set).

Sides (each repeat runs all three, rotating which goes first, so machine load hits them alike):

* ``shiftkit``: ``run_grpo``, fp32, no gradient checkpointing.
* ``trl_matched``: TRL ``GRPOTrainer`` with ``bf16=False, gradient_checkpointing=False`` (fp32, like shiftkit).
* ``trl_defaults``: TRL's defaults for these two knobs (``bf16=True`` -> CPU bf16 autocast,
  ``gradient_checkpointing=True``), everything else as above. Reported for reference only, labelled.

Phases. shiftkit: from its ``metrics.jsonl`` (``time/sample`` = generation incl. tokenize/decode;
``time/update`` = forward + backward + clip + optimizer step; scoring = step - generation - update =
rewards, advantages and the (here empty) old/ref log-prob scoring). TRL: measured by wrapping the
trainer's own methods on the instance: generation = ``_generate`` (tokenize + ``model.generate`` +
decode), scoring = ``_generate_and_score_completions`` minus generation (rewards, advantages, padding,
old log-probs when needed), update = step (``on_step_begin`` -> ``on_step_end`` callback) minus
``_generate_and_score_completions`` (loss forward, backward, clip, optimizer + scheduler step).
Tokens: completion tokens per step (shiftkit: ``response_len`` x batch; TRL:
``completions/mean_length`` x batch); tokens/s = completion tokens / phase or step seconds.
The first step of every run is a warm-up and is dropped.

    .venv/bin/python -m pip install -q 'trl==1.16.0'
    .venv/bin/shiftkit world build out=/tmp/h1/world strong_steps=20 threads=1   # weak SFT model: 400 steps
    .venv/bin/python benchmarks/bench_rl_step.py --model /tmp/h1/world/weak/final --repeats 3 --steps 6

``--profile DIR`` additionally writes a cProfile of one extra run of each of shiftkit and trl_matched.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import trl_phase_timer  # noqa: E402
from shiftkit.io import atomic_write_json, read_jsonl  # noqa: E402
from shiftkit.models import WEAK_SPEC, load_model_and_tokenizer, make_char_tokenizer, make_tiny_model, save_model  # noqa: E402
from shiftkit.tasks import Mixture  # noqa: E402

PHASES = ("generation", "scoring", "update", "step")


def shiftkit_steps(model_dir: str, steps: int, prompts: int, gens: int, max_new: int, seed: int,
                   threads: int) -> list[dict]:
    from shiftkit.rl import GRPOConfig, run_grpo

    with tempfile.TemporaryDirectory() as d:
        run_grpo(GRPOConfig(model=model_dir, out=f"{d}/run", tasks=["add", "mul"], steps=steps,
                            prompts_per_step=prompts, group_size=gens, max_new_tokens=max_new, seed=seed,
                            eval_every=0, progress=False, lr=6e-5, threads=threads))
        rows = [r for r in read_jsonl(f"{d}/run/metrics.jsonl") if "step_time" in r]
    out = []
    for r in rows:
        gen, upd, step = r["time/sample"], r["time/update"], r["step_time"]
        out.append({"generation": gen, "update": upd, "scoring": step - gen - upd, "step": step,
                    "completion_tokens": r["response_len"] * prompts * gens, "threads": torch.get_num_threads()})
    return out


def trl_steps(model_dir: str, steps: int, prompts: int, gens: int, max_new: int, seed: int, threads: int,
              defaults: bool) -> list[dict]:
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

    rows: list[dict] = []

    def row(step, gen, gen_score, tr):
        mean_len = tr._metrics["train"]["completions/mean_length"][-1]
        return {"generation": gen, "scoring": gen_score - gen, "update": step - gen_score, "step": step,
                "completion_tokens": mean_len * prompts * gens, "threads": torch.get_num_threads()}

    attach, timer = trl_phase_timer(rows, row)

    knobs = {} if defaults else {"bf16": False, "gradient_checkpointing": False}
    with tempfile.TemporaryDirectory() as d:
        cfg = GRPOConfig(output_dir=d, use_cpu=True, per_device_train_batch_size=prompts * gens,
                         num_generations=gens, max_completion_length=max_new, temperature=1.0, top_p=1.0,
                         learning_rate=6e-5, beta=0.0, loss_type="dapo", scale_rewards="group", max_grad_norm=1.0,
                         num_iterations=1, max_steps=steps, logging_steps=10**6, save_strategy="no",
                         report_to=[], seed=seed, disable_tqdm=True, dataloader_num_workers=0, **knobs)
        tr = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok,
                         callbacks=[timer])
        attach(tr)
        torch.set_num_threads(threads)
        tr.train()
    return rows


def trl_settings(defaults: bool) -> dict:
    from trl import GRPOConfig

    c = GRPOConfig(output_dir=tempfile.gettempdir(), use_cpu=True,
                   **({} if defaults else {"bf16": False, "gradient_checkpointing": False}))
    return {"bf16": c.bf16, "gradient_checkpointing": c.gradient_checkpointing, "optim": str(c.optim),
            "loss_type": c.loss_type, "scale_rewards": c.scale_rewards, "beta": c.beta}


def summarize(xs: list[float]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def side_summary(rows: list[dict]) -> dict:
    out = {p: summarize([r[p] for r in rows]) for p in PHASES}
    out["completion_tokens_per_step"] = summarize([r["completion_tokens"] for r in rows])
    out["tokens_per_s_step"] = summarize([r["completion_tokens"] / r["step"] for r in rows])
    out["tokens_per_s_generation"] = summarize([r["completion_tokens"] / r["generation"] for r in rows])
    out["threads_seen"] = sorted({r["threads"] for r in rows})
    return out


def profile_one(fn, path: Path, *args) -> str:
    pr = cProfile.Profile()
    pr.enable()
    fn(*args)
    pr.disable()
    pr.dump_stats(str(path))
    s = pstats.Stats(str(path))
    import io

    buf = io.StringIO()
    s.stream = buf
    s.sort_stats("cumulative").print_stats(40)
    (path.with_suffix(".txt")).write_text(buf.getvalue())
    return str(path.with_suffix(".txt"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="HF model dir (default: a fresh, untrained WEAK_SPEC model)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-trl-defaults", action="store_true")
    ap.add_argument("--profile", default="", help="directory for cProfile dumps of one extra run per side")
    ap.add_argument("--out", default="benchmarks/results/rl_step.json")
    a = ap.parse_args()
    want = {"OMP_NUM_THREADS": str(a.threads), "OMP_WAIT_POLICY": "PASSIVE"}
    if any(os.environ.get(k) != v for k, v in want.items()):  # OpenMP reads these at start-up only
        os.execvpe(sys.executable, [sys.executable, *sys.argv], {**os.environ, **want})
    torch.set_num_threads(a.threads)
    tmp = None
    model_dir = a.model
    if not model_dir:
        tmp = tempfile.TemporaryDirectory()
        tok = make_char_tokenizer()
        model_dir = f"{tmp.name}/weak"
        save_model(make_tiny_model(WEAK_SPEC, len(tok)), tok, model_dir)
    args = (model_dir, a.steps, a.prompts, a.generations, a.max_new_tokens)
    sides = {"shiftkit": lambda seed: shiftkit_steps(*args, seed, a.threads),
             "trl_matched": lambda seed: trl_steps(*args, seed, a.threads, defaults=False)}
    if not a.no_trl_defaults:
        sides["trl_defaults"] = lambda seed: trl_steps(*args, seed, a.threads, defaults=True)
    got: dict[str, list[dict]] = {k: [] for k in sides}
    names = list(sides)
    for r in range(a.repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            t = sides[name](r)
            got[name] += t[1:]  # drop the warm-up step
            print(f"repeat {r} {name}: median step {statistics.median(x['step'] for x in t[1:]):.3f} s", flush=True)
    import transformers
    import trl

    med = {k: statistics.median(x["step"] for x in v) for k, v in got.items()}
    res = {
        "what": "seconds per GRPO step (generation + scoring + update), shiftkit vs TRL GRPOTrainer",
        "command": "python benchmarks/bench_rl_step.py " + " ".join(sys.argv[1:]),
        "peer": {"name": "trl.GRPOTrainer", "version": trl.__version__, "transformers": transformers.__version__},
        "ratio": med["trl_matched"] / med["shiftkit"],
        "ratio_note": "TRL matched median step / shiftkit median step; > 1 means shiftkit is faster",
        "matched": {"dtype": "fp32", "gradient_checkpointing": False, "prompts": a.prompts,
                    "generations": a.generations, "batch": a.prompts * a.generations,
                    "max_new_tokens": a.max_new_tokens, "temperature": 1.0, "top_p": 1.0,
                    "loss": "token-mean (DAPO) aggregation, group-std advantages, no KL, one update per batch",
                    "grad_clip": 1.0, "lr": 6e-5, "threads": a.threads, "OMP_WAIT_POLICY": "PASSIVE",
                    "model": a.model or "fresh WEAK_SPEC (untrained)",
                    "trl_settings": trl_settings(False)},
        "trl_defaults": ({"ratio": med["trl_defaults"] / med["shiftkit"], "settings": trl_settings(True),
                          "note": "TRL's defaults for bf16 / gradient checkpointing on this CPU (no native bf16); "
                                  "not a matched comparison"} if "trl_defaults" in med else None),
        "sides": {k: side_summary(v) for k, v in got.items()},
        "phase_method": {"shiftkit": "metrics.jsonl: time/sample, time/update; scoring = step - both",
                         "trl": "wrapped GRPOTrainer._generate and _generate_and_score_completions on the instance; "
                                "step from a TrainerCallback (on_step_begin -> on_step_end)"},
        "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "load_avg_at_end": os.getloadavg(),
        "warmup": "first step of every run dropped", "repeats": a.repeats, "steps_per_run": a.steps,
    }
    if a.profile:
        p = Path(a.profile)
        p.mkdir(parents=True, exist_ok=True)
        res["profiles"] = {"shiftkit": profile_one(lambda: sides["shiftkit"](0), p / "shiftkit.prof"),
                           "trl_matched": profile_one(lambda: sides["trl_matched"](0), p / "trl_matched.prof")}
    atomic_write_json(a.out, res)
    print(json.dumps({"ratio": res["ratio"], "trl_defaults_ratio": (res["trl_defaults"] or {}).get("ratio"),
                      **{k: {p: round(v[p]["median"], 4) for p in PHASES} for k, v in res["sides"].items()}},
                     indent=1))


if __name__ == "__main__":
    main()
