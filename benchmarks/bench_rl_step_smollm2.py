"""A GRPO step on a real model: shiftkit vs TRL's GRPOTrainer at matched settings, per phase, with the machine's
floor beside each phase, interleaved in one run.

SmolLM2-135M-Instruct (``shiftkit model import-gguf smollm2 --out DIR``), word problems through the model's chat
template (conversational prompts on TRL's side, ``chat_template=auto`` on shiftkit's: the same ids), a reward
with signal on any text (hash parity of the completion, ``bench_memory.parity_reward``, the TRL signature, on
both sides), ``--prompts`` x ``--generations`` rollouts (default 2 x 4) of at most ``--max-new-tokens`` (64)
tokens, temperature 1, top-p 1; token-mean loss, group-std advantages, no KL, no clip, one update per batch,
grad-norm clip 1.0, AdamW lr 1e-6; fp32, no gradient checkpointing, one thread and ``OMP_WAIT_POLICY=PASSIVE``
on both sides. Each repeat runs both sides (rotating which goes first) for ``--steps`` steps; the first step of
every run is a warm-up and is dropped.

Phases as in ``bench_rl_step.py``: shiftkit from ``metrics.jsonl`` (generation = ``time/sample``, scoring =
``time/score``, update = ``time/update``, other = step - those); TRL by wrapping ``_generate`` and
``_generate_and_score_completions`` on the instance and a step callback.

The floor of each phase, from the work that phase did in that step, is ``max(bytes / copy bandwidth,
FLOPs / matmul peak)``, both measured in the same run before each repeat (one thread; copy bandwidth counts
bytes read + written, STREAM's way; the peak is a 1024^3 fp32 matmul):

* generation: the prompt's forward and every decode step read the weights once (``W`` bytes; a lower bound on
  the decode steps is the mean completion length), and the prompt's and generated tokens cost ``2 N`` FLOPs
  each (``N`` parameters);
* update: forward + backward + AdamW read the weights 2x, write the gradients, and AdamW reads parameters,
  gradients and both moments and writes three: ``10 W`` bytes; ``6 N`` FLOPs per token of prompt + completion;
* scoring: nothing at these settings (no old or reference log-probs are needed): 0.

``ratio`` = TRL median step / shiftkit median step (> 1: shiftkit faster); per phase in ``phase_ratios``.
The goal is 2x.

    python benchmarks/bench_rl_step_smollm2.py --model /work/models/smollm2 --repeats 3 --steps 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.common import copy_bandwidth, load_avg, provenance, single_thread, spread, trl_phase_timer  # noqa: E402

PHASES = ("generation", "scoring", "update", "other", "step")
LR = 1e-6


def problems(n: int) -> list[dict]:
    from shiftkit.tasks.wordproblems import generate

    return [{"question": r["question"], "answer": r["answer"]} for r in generate(n, "train", seed=0)]


def shiftkit_steps(model: str, steps: int, prompts: int, gens: int, max_new: int, seed: int) -> list[dict]:
    from shiftkit.io import read_jsonl
    from shiftkit.rl import GRPOConfig, run_grpo

    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "train.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in problems(64)))
        run_grpo(GRPOConfig(model=model, out=f"{d}/run", data=str(data), prompt_key="question", answer_key="answer",
                            reward=["bench_memory:parity_reward"], steps=steps, prompts_per_step=prompts,
                            group_size=gens, max_new_tokens=max_new, lr=LR, seed=seed, eval_every=0, save_every=0,
                            samples_every=0, threads=1, progress=False))
        rows = [r for r in read_jsonl(f"{d}/run/metrics.jsonl") if "step_time" in r]
    out = []
    for r in rows:
        gen, sc, upd, step = r["time/sample"], r.get("time/score", 0.0), r["time/update"], r["step_time"]
        out.append({"generation": gen, "scoring": sc, "update": upd, "other": step - gen - sc - upd, "step": step,
                    "mean_len": r["response_len"], "rows": prompts * gens})
    return out


def trl_steps(model: str, steps: int, prompts: int, gens: int, max_new: int, seed: int) -> list[dict]:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from bench_memory import parity_reward
    from shiftkit.models import load_model_and_tokenizer

    m, tok = load_model_and_tokenizer(model)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["question"]}], "answer": r["answer"]}
                            for r in problems(64)])
    rows: list[dict] = []

    def row(step, gen, gen_score, tr):
        return {"generation": gen, "scoring": gen_score - gen, "update": step - gen_score, "other": 0.0, "step": step,
                "mean_len": tr._metrics["train"]["completions/mean_length"][-1], "rows": prompts * gens}

    attach, timer = trl_phase_timer(rows, row)
    with tempfile.TemporaryDirectory() as d:
        cfg = GRPOConfig(output_dir=d, use_cpu=True, per_device_train_batch_size=prompts * gens, num_generations=gens,
                         max_completion_length=max_new, temperature=1.0, top_p=1.0, learning_rate=LR, beta=0.0,
                         loss_type="dapo", scale_rewards="group", max_grad_norm=1.0, num_iterations=1,
                         max_steps=steps, logging_steps=10**6, save_strategy="no", report_to=[], seed=seed,
                         disable_tqdm=True, dataloader_num_workers=0, bf16=False, gradient_checkpointing=False)
        tr = GRPOTrainer(model=m, reward_funcs=[parity_reward], args=cfg, train_dataset=ds, processing_class=tok,
                         callbacks=[timer])
        attach(tr)
        torch.set_num_threads(1)
        tr.train()
    return rows


def matmul_peak(n: int = 1024, repeats: int = 3) -> float:
    """Best-of-``repeats`` FLOP/s of one fp32 ``n^3`` matmul on one thread."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def floors(r: dict, N: int, W: int, prompt_len: float, bw: float, peak: float) -> dict:
    tokens = r["rows"] * (prompt_len + r["mean_len"])  # the prompt's forward and every generated token
    gen_mem, gen_flop = (1 + r["mean_len"]) * W / bw, 2 * N * tokens / peak
    upd_mem, upd_flop = 10 * W / bw, 6 * N * tokens / peak
    gen, upd = max(gen_mem, gen_flop), max(upd_mem, upd_flop)
    return {"generation": gen, "scoring": 0.0, "update": upd, "other": 0.0, "step": gen + upd,
            "generation_bound": "memory" if gen_mem >= gen_flop else "compute",
            "update_bound": "memory" if upd_mem >= upd_flop else "compute"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", default="benchmarks/results/rl_step_smollm2.json")
    a = ap.parse_args()
    single_thread(1)
    import transformers
    import trl

    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.prompts import PromptRenderer

    m, tok = load_model_and_tokenizer(a.model)
    seen, N, W = set(), 0, 0
    for p in m.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            N += p.numel()
            W += p.numel() * p.element_size()
    ren = PromptRenderer(tok)
    prompt_len = statistics.mean(len(ren.ids(r["question"])) for r in problems(64))
    del m
    args = (a.model, a.steps, a.prompts, a.generations, a.max_new_tokens)
    sides = {"shiftkit": lambda r: shiftkit_steps(*args, r), "trl_matched": lambda r: trl_steps(*args, r)}
    got: dict[str, list[dict]] = {k: [] for k in sides}
    loads, machine = [load_avg()], []
    names = list(sides)
    for r in range(a.repeats):
        bw, peak = copy_bandwidth(), matmul_peak()
        machine.append({"copy_bw_GBps": bw / 1e9, "matmul_peak_GFLOPs": peak / 1e9})
        for name in names[r % len(names):] + names[: r % len(names)]:
            rows = sides[name](r)[1:]  # the first step of every run is a warm-up
            for x in rows:
                x["floor"] = floors(x, N, W, prompt_len, bw, peak)
            got[name] += rows
            print(f"repeat {r} {name}: median step {statistics.median(x['step'] for x in rows):.2f} s "
                  f"(floor {statistics.median(x['floor']['step'] for x in rows):.2f} s)", flush=True)
        loads.append(load_avg())

    def summary(rows):
        out = {p: spread([x[p] for x in rows]) for p in PHASES}
        out["floor"] = {p: spread([x["floor"][p] for x in rows]) for p in PHASES}
        out["over_floor"] = {p: spread([x[p] / x["floor"][p] for x in rows]) for p in ("generation", "update", "step")}
        out["bound"] = {k: sorted({x["floor"][k] for x in rows}) for k in ("generation_bound", "update_bound")}
        out["mean_completion_len"] = spread([x["mean_len"] for x in rows])
        out["tokens_per_s_step"] = spread([x["rows"] * x["mean_len"] / x["step"] for x in rows])
        return out

    med = {k: {p: statistics.median(x[p] for x in v) for p in PHASES} for k, v in got.items()}
    res = {"what": "seconds per GRPO step on SmolLM2-135M-Instruct, per phase, against the machine's floor",
           **provenance(),
           "peer": {"name": "trl.GRPOTrainer", "version": trl.__version__, "transformers": transformers.__version__},
           "ratio": med["trl_matched"]["step"] / med["shiftkit"]["step"],
           "ratio_note": "TRL median step / shiftkit median step (> 1: shiftkit faster); the goal is 2x",
           "phase_ratios": {p: med["trl_matched"][p] / med["shiftkit"][p] for p in ("generation", "update")},
           "matched": {"model": "SmolLM2-135M-Instruct (GGUF import), fp32", "params": N, "weight_bytes": W,
                       "prompts": a.prompts, "generations": a.generations, "max_new_tokens": a.max_new_tokens,
                       "temperature": 1.0, "top_p": 1.0, "data": "word problems through the chat template",
                       "reward": "hash parity of the completion (bench_memory.parity_reward) on both sides",
                       "loss": "token mean, group-std advantages, no KL, no clip, one update per batch",
                       "lr": LR, "grad_clip": 1.0, "optimizer": "AdamW", "gradient_checkpointing": False,
                       "dtype": "fp32", "threads": 1, "OMP_WAIT_POLICY": "PASSIVE",
                       "mean_prompt_tokens": prompt_len},
           "floor_method": "per phase max(bytes / copy bandwidth, FLOPs / matmul peak), measured before each repeat; "
                           "generation: (1 + mean length) x W bytes, 2N FLOPs per prompt+generated token; update: "
                           "10 W bytes, 6N FLOPs per prompt+completion token; scoring: 0",
           "machine_limits": {k: spread([x[k] for x in machine]) for k in machine[0]},
           "sides": {k: summary(v) for k, v in got.items()},
           "load_avg": loads, "repeats": a.repeats, "steps_per_run": a.steps,
           "warmup": "first step of every run dropped", "runs": got}
    from shiftkit.io import atomic_write_json

    atomic_write_json(a.out, res)
    print(json.dumps({"ratio": res["ratio"], "phase_ratios": res["phase_ratios"]} |
                     {k: {p: round(v[p]["median"], 2) for p in PHASES} | {"floor_step": round(v["floor"]["step"]["median"], 2)}
                      for k, v in res["sides"].items()}, indent=1))


if __name__ == "__main__":
    main()
