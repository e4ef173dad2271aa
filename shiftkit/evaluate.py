"""Evaluation: greedy accuracy and unbiased pass@k on a fixed held-out set, for ``shiftkit eval``
(:func:`run_eval`) and for the training loops' periodic evaluation (:func:`held_out_eval`).

pass@k uses the estimator of Chen et al. (2021): with n samples of which c are correct,
``pass@k = 1 - C(n-c, k) / C(n, k)`` per problem, averaged over problems with its standard error
(:mod:`shiftkit.metrics`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from shiftkit.config import check_dependent
from shiftkit.data import DataKeys, is_arith
from shiftkit.dist import set_threads
from shiftkit.errors import ShiftkitError
from shiftkit.inputs import prompt_inputs
from shiftkit.io import JsonlWriter, atomic_write_json, progress_bar
from shiftkit.metrics import default_ks, eval_report, pass_at_k
from shiftkit.metrics import mean_se as mean_stderr
from shiftkit.models import check_tokenizer_matches, load_model_and_tokenizer
from shiftkit.prompts import CHAT_TEMPLATE_RULES, PromptKeys
from shiftkit.rewards import RewardKeys, TaskRewards
from shiftkit.runs import refuse_foreign_dir
from shiftkit.sampling import sample
from shiftkit.tasks.base import Problem


@torch.no_grad()
def evaluate_model(
    model,
    tokenizer,
    problems: list[Problem],
    reward_fn: Callable[[Problem, str], float],
    *,
    n_samples: int = 0,
    ks: Sequence[int] | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    batch_size: int = 256,
    seed: int = 0,
    progress: bool = False,
) -> dict:
    """Greedy accuracy, and pass@k from ``n_samples`` samples per problem (if > 0).

    Returns flat metrics (``greedy_acc``, ``greedy_acc_se``, ``pass@k``, ``pass@k_se``, per-domain
    greedy accuracy ``greedy_acc/<domain>``) plus ``per_problem`` rows.
    """
    if not problems:
        raise ShiftkitError("evaluation set is empty")
    t0 = time.time()
    prompts = [p.prompt for p in problems]
    greedy_texts: list[str] = []
    it = range(0, len(prompts), batch_size)
    for s in it:
        r = sample(model, tokenizer, prompts[s : s + batch_size], max_new_tokens=max_new_tokens, greedy=True)
        greedy_texts += r.texts
    correct = [reward_fn(p, t) for p, t in zip(problems, greedy_texts)]
    out: dict = {}
    out["greedy_acc"], out["greedy_acc_se"] = mean_stderr(correct)
    for dom in sorted({p.domain for p in problems}):
        vals = [c for p, c in zip(problems, correct) if p.domain == dom]
        out[f"greedy_acc/{dom}"] = float(np.mean(vals))
    rows = [{"prompt": p.prompt, "answer": p.answer, "domain": p.domain, "greedy": t, "greedy_correct": c}
            for p, t, c in zip(problems, greedy_texts, correct)]
    if n_samples > 0:
        ks = list(ks) if ks else default_ks(n_samples)
        # n_samples per problem, in batches of whole problems; per-row seeds make results batch-invariant
        counts = np.zeros(len(problems), dtype=np.int64)
        flat = [(i, j) for i in range(len(problems)) for j in range(n_samples)]
        bar = None
        if progress:
            bar = progress_bar(len(flat), 0, "pass@k samples")  # log lines when stderr is not a terminal
        for s in range(0, len(flat), batch_size):
            chunk = flat[s : s + batch_size]
            r = sample(model, tokenizer, [prompts[i] for i, _ in chunk], max_new_tokens=max_new_tokens,
                       temperature=temperature, top_p=top_p,
                       row_seeds=[seed * 1_000_003 + i * 1009 + j for i, j in chunk])
            for (i, _), text in zip(chunk, r.texts):
                counts[i] += reward_fn(problems[i], text) > 0
            if bar:
                bar.update(len(chunk))
        if bar:
            bar.close()
        for k in ks:
            vals = [pass_at_k(n_samples, int(c), k) for c in counts]
            out[f"pass@{k}"], out[f"pass@{k}_se"] = mean_stderr(vals)
        for row, c in zip(rows, counts):
            row["n_correct"] = int(c)
        out["n_samples"] = n_samples
    out["n_problems"] = len(problems)
    out["eval_seconds"] = time.time() - t0
    out["per_problem"] = rows
    return out


@dataclasses.dataclass
class ModelEvalConfig(DataKeys, PromptKeys, RewardKeys):
    """``shiftkit eval``: one model on a held-out set (the user's data, or the arithmetic tasks); the keys
    below plus the shared data, prompt and reward groups (``split`` defaults to test here)."""

    model: str = ""  # HF model dir or cached hub id
    shuffle: bool = False  # eval: with max_samples, a seeded subset instead of the first rows (off by default)
    n: int = 100  # arith data: held-out problems per domain
    # -- sampling and metrics --
    greedy: bool = True  # report greedy accuracy (one greedy completion per problem)
    samples: int = 0  # samples per problem: avg@K and pass@1..pass@K (0 = greedy only)
    temperature: float = 1.0  # sampling temperature of the K samples (the papers: 0.7)
    top_p: float = 1.0  # nucleus sampling of the K samples (the papers: 0.95)
    max_new_tokens: int = 1024  # completion length limit (truncated responses are counted)
    batch_size: int = 64  # completions generated together
    seed: int = 0  # sample j of problem i uses a seed from (seed, i, j): batch-invariant
    out: str = ""  # output: a directory (summary.json + problems.jsonl), or a .json file (+ .jsonl beside it)
    overwrite: bool = False  # replace an existing out directory that is not an eval output
    threads: int = 0  # torch threads (0 = torch's default)
    progress: bool = True  # completions done: a bar on a terminal, a line every 5% or 30 s when stderr is a log

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("eval needs model=<path or hub id> (or --model)")
        if self.n <= 0:
            raise ShiftkitError("eval: n must be positive")
        if self.samples < 0 or self.batch_size <= 0:
            raise ShiftkitError("eval: samples must be >= 0 and batch_size positive")
        if not self.greedy and not self.samples:
            raise ShiftkitError("eval: greedy=false needs samples=K > 0 (nothing to evaluate)")
        if self.data and not is_arith(self.data) and self.n != 100:
            raise ShiftkitError(f"eval: data={self.data} does not read n (the arith held-out size); use max_samples")
        samples = (lambda c: c.samples > 0, "with samples=K > 0 (greedy decoding ignores them)")
        check_dependent(self, {"temperature": samples, "top_p": samples,
                               **CHAT_TEMPLATE_RULES,
                               "shuffle": (lambda c: c.max_samples > 0, "with max_samples > 0 (the subset it draws)")},
                        "eval")


def _generate(model, tok, inp, examples: list, max_new_tokens: int, batch_size: int, *, greedy: bool,
              k: int = 1, temperature: float = 1.0, top_p: float = 1.0, seed: int = 0, bar=None):
    """``(texts_PK, lengths_PK, eos_PK)``: k completions per example (rendered prompts, per-row seeds);
    ``bar`` (a :func:`shiftkit.io.progress_bar`) counts the completions."""
    flat = [(i, j) for i in range(len(examples)) for j in range(k)]
    texts, lens, eos = [], [], []
    for s in range(0, len(flat), batch_size):
        chunk = flat[s: s + batch_size]
        prompts = inp.prompts_for([examples[i] for i, _ in chunk])
        kw = dict(max_new_tokens=max_new_tokens)
        if greedy:
            kw["greedy"] = True
        else:
            kw.update(temperature=temperature, top_p=top_p, row_seeds=[seed * 1_000_003 + i * 1009 + j for i, j in chunk])
        r = (sample(model, tok, prompt_ids=prompts, **kw) if prompts and not isinstance(prompts[0], str)
             else sample(model, tok, prompts, **kw))
        texts += r.texts
        lens += r.completion_mask_BT.sum(-1).tolist()
        eos += r.eos_B.tolist()
        if bar is not None:
            bar.update(len(chunk))
    group = lambda xs: [xs[i * k:(i + 1) * k] for i in range(len(examples))]  # noqa: E731
    return group(texts), group(lens), group(eos)


@torch.no_grad()
def greedy_eval(model, tok, inp, examples: list, max_new_tokens: int, batch_size: int = 64) -> tuple[dict, list]:
    """Greedy accuracy (and length/truncation) of ``examples`` under ``inp``'s renderer and rewards."""
    t, ln, e = _generate(model, tok, inp, examples, max_new_tokens, batch_size, greedy=True)
    return eval_report(examples, inp.rewards, greedy=([x[0] for x in t], [x[0] for x in ln], [x[0] for x in e]))


def _write_eval(out: str, summary: dict, rows: list[dict], overwrite: bool) -> dict:
    p = Path(out)
    if p.suffix == ".json":
        summary_path, rows_path = p, p.with_suffix(".jsonl")
    else:
        refuse_foreign_dir(p, overwrite, marker="summary.json")
        summary_path, rows_path = p / "summary.json", p / "problems.jsonl"
    with JsonlWriter(rows_path, append=False) as w:
        for r in rows:
            w.write(r)
    atomic_write_json(summary_path, summary)
    return {"summary_file": str(summary_path), "problems_file": str(rows_path)}


@torch.no_grad()
def run_eval(cfg: ModelEvalConfig) -> dict:
    """Evaluate ``cfg.model`` on ``cfg.data``: greedy accuracy, avg@K, pass@1..K, response length and
    truncation; with ``out`` also one JSONL row per problem (prompt, answer, completions, rewards)."""
    set_threads(cfg.threads)
    model, tok = load_model_and_tokenizer(cfg.model)
    check_tokenizer_matches(model, tok, cfg.model)
    model.eval()
    inp = prompt_inputs(cfg, tok, "eval", eval_n=cfg.n, for_eval=True, model_path=cfg.model)
    examples = list(inp.ds.items)
    t0 = time.time()
    greedy = samples = None
    total = len(examples) * (int(cfg.greedy) + cfg.samples)
    bar = progress_bar(total, 0, f"eval {Path(cfg.model).name}", unit="completions") if cfg.progress else None
    if cfg.greedy:
        t, ln, e = _generate(model, tok, inp, examples, cfg.max_new_tokens, cfg.batch_size, greedy=True, bar=bar)
        greedy = ([x[0] for x in t], [x[0] for x in ln], [x[0] for x in e])
    if cfg.samples:
        samples = _generate(model, tok, inp, examples, cfg.max_new_tokens, cfg.batch_size, greedy=False,
                            k=cfg.samples, temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed, bar=bar)
    if bar is not None:
        bar.close()
    summary, rows = eval_report(examples, inp.rewards, greedy=greedy, samples=samples,
                                ks=default_ks(cfg.samples) if cfg.samples else None)
    summary.update({"data": inp.ds.name, "reward": inp.rewards.describe(), "prompts": inp.renderer.describe(),
                    "eval_seconds": time.time() - t0})
    if cfg.out:
        summary.update(_write_eval(cfg.out, summary, rows, cfg.overwrite))
    return summary


# ---- the training loops' periodic evaluation ----

def task_eval_fn(model, tok, problems: list[Problem], reward_fn, max_new_tokens: int) -> Callable[[], dict] | None:
    """``eval_fn`` for the kit: greedy accuracy on the toy tasks' ``problems`` as ``eval/...`` keys (None without)."""
    if not problems:
        return None

    def eval_fn() -> dict:
        ev = evaluate_model(model, tok, problems, reward_fn, max_new_tokens=max_new_tokens)
        return {f"eval/{k}": v for k, v in ev.items() if k != "per_problem"}

    return eval_fn


def held_out_eval(model, tok, inp, max_new_tokens: int) -> Callable[[], dict] | None:
    """``eval_fn`` for the kit on a run's held-out rows (None without any): the toy tasks' greedy
    accuracy on arith data, else greedy accuracy under the run's rewards on the ``eval_split`` rows."""
    if not inp.eval_items:
        return None
    if inp.arith:
        if isinstance(inp.rewards, TaskRewards):
            reward_fn = inp.rewards.mixture.reward
        else:  # e.g. reward=arith on arith data: the run's own rewards on the held-out problems
            by_problem = {id(e.problem): e for e in inp.eval_items}

            def reward_fn(p, text):
                return float(inp.rewards.score([by_problem[id(p)]], [text]).total[0] > 0)
        return task_eval_fn(model, tok, [e.problem for e in inp.eval_items], reward_fn, max_new_tokens)

    def eval_fn() -> dict:
        summary, _ = greedy_eval(model, tok, inp, inp.eval_items, max_new_tokens)
        return {f"eval/{k}": v for k, v in summary.items()}

    return eval_fn
