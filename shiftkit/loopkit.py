"""The training kit: the bookkeeping every loop shares, as plain functions (no trainer class, no callbacks).

A loop (``sft.py``, ``rl.py``, ``opd/loop.py``, ``agent/rl.py``) keeps its step body inline and calls these::

    d, run = open_run(cfg, d)                   # threads, launcher settings, the run directory (finished: its summary)
    train = d.wrap(model)                       # DDP wrapper, or FSDP2 sharding ``model`` in place (shiftkit.dist)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = resume(run, model, opt, d, cfg.steps, desc, cfg.progress, cfg.report_to)  # checkpoint, logs, bar
    first_eval(st, eval_fn)                    # step-0 evaluation of a fresh run
    for step in range(st.start, cfg.steps):
        mine, roll = rollout(model, tok, prompts_P, G, cfg.seed, step, d, ...)   # the one seed formula
        opt.zero_grad(set_to_none=True)  # then the update, a visible for over microbatch.accumulating(...)
        gnorm = clip_and_step(model, opt, cfg.grad_clip, skip=not has_signal)
        write_samples(st, step, cfg.samples_every, lambda: samples_rows(...))
        log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn)
        checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt)
    return close_run(st, model, tok, summary, row)

A loop counts ``step`` from 0 (its ``range`` index); what the kit writes and prints says ``step + 1``,
the updates done (:mod:`shiftkit.runs`: step N = after N updates, step 0 = the evaluation before them).
Every random draw is a function of ``(seed, step)`` (the data's ``draw``, :func:`row_seed`), so a
checkpoint holds only weights, optimizer state, the step and an ``extra`` dict, and a resumed run
continues bit for bit. No algorithm math lives here (nor LoRA: :mod:`shiftkit.models`; scoring:
:mod:`shiftkit.logprobs`; held-out evaluation: :mod:`shiftkit.evaluate`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from shiftkit.config import to_dict
from shiftkit.dist import Dist, full_state_dict, set_threads
from shiftkit.errors import ShiftkitError
from shiftkit.io import JsonlWriter, LineProgress, progress_bar, truncate_jsonl
from shiftkit.runs import RunDir, check_report_to, make_trackers, open_run_dir  # noqa: F401 (kit.check_report_to)
from shiftkit.sampling import concat_rollouts, sample

# ------------------------------------------------------------------------------ optimizer and schedule

def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.98)) -> torch.optim.Optimizer:
    """AdamW; matrices decay, vectors (norms, biases) do not; shared parameters appear once. The fused
    kernel (CPU and CUDA, as TRL's default ``adamw_torch_fused``) allocates no per-step temporaries."""
    decay, no_decay, seen = [], [], set()
    for n, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    params = decay + no_decay
    fused = bool(params) and all(p.is_floating_point() and p.device == params[0].device for p in params) \
        and params[0].device.type in ("cpu", "cuda")
    return torch.optim.AdamW(groups, lr=lr, betas=betas, **({"fused": True} if fused else {"foreach": True}))


def lr_at(step: int, base_lr: float, warmup: int, total: int, schedule: str = "cosine", min_ratio: float = 0.1) -> float:
    """Linear warm-up, then ``constant``, or ``cosine`` / ``linear`` decay to ``min_ratio * base_lr``."""
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    if schedule == "constant":
        return base_lr
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "cosine":
        return base_lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))
    if schedule == "linear":
        return base_lr * (min_ratio + (1 - min_ratio) * (1 - frac))
    raise ShiftkitError(f"unknown lr schedule '{schedule}' (use constant, cosine or linear)")


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr


def grad_norm_clip(model: torch.nn.Module, max_norm: float) -> float:
    """Clip the gradient norm to ``max_norm`` (0 = no clipping); returns the norm before clipping."""
    if not (params := [p for p in model.parameters() if p.grad is not None]):
        return 0.0
    n = torch.nn.utils.clip_grad_norm_(params, max_norm) if max_norm > 0 else \
        torch.norm(torch.stack([p.grad.detach().norm() for p in params]))
    return float(n.full_tensor() if hasattr(n, "full_tensor") else n)  # FSDP: a DTensor, reduced over ranks


def clip_and_step(model: torch.nn.Module, opt: torch.optim.Optimizer, grad_clip: float, skip: bool = False) -> float:
    """Clip the accumulated gradient and step; returns the grad norm before clipping.

    ``skip`` (the no-signal guard): a batch that carries no information (every advantage 0, no KL)
    still has its gradient computed, but Adam does not step on it -- its momentum would move the
    policy on zero gradients.
    """
    gnorm = grad_norm_clip(model, grad_clip)
    if not skip:
        opt.step()
    return gnorm


# ------------------------------------------------------------------------------ the draws of one step

def row_seed(seed: int, step: int, prompt_idx: int, sample_idx: int) -> int:
    """The sampling seed of one rollout; independent of how rows are batched or sharded."""
    return (seed * 1_000_003 + step * 10_007 + prompt_idx * 101 + sample_idx) % (2**62)


def needs_old_logprobs(clip_low: float, clip_high: float, ppo_epochs: int, top_p: float = 1.0) -> bool:
    """Whether the update needs log-probs scored before it (PPO's "old" policy) rather than the
    detached log-probs of its own forward: with a clip, several epochs, or a truncated sampler."""
    return bool(clip_low) or bool(clip_high) or ppo_epochs > 1 or top_p < 1.0


def rollout(model, tok, prompts_P: list, group_size: int, seed: int, step: int, d: Dist, *,
            max_new_tokens: int, temperature: float, top_p: float = 1.0, rows: int = 0):
    """``group_size`` samples of this rank's share of the prompts, each row seeded by :func:`row_seed`.

    A prompt is a string or its token ids (what :meth:`shiftkit.prompts.PromptRenderer.ids` gives).
    Returns ``(mine, roll)``: the prompt indices this rank took and the :class:`~shiftkit.sampling.Rollouts`
    (row ``k * G + j`` is sample ``j`` of prompt ``mine[k]``). ``rows`` > 0 samples at most that many rows
    at once (the KV cache of ``rows`` sequences); every row has its own seed, so the tokens do not depend on it."""
    mine = d.shard(list(range(len(prompts_P))))
    prompts = [prompts_P[i] for i in mine for _ in range(group_size)]
    seeds = [row_seed(seed, step, i, j) for i in mine for j in range(group_size)]
    step_rows = rows or max(1, len(prompts))
    parts = []
    with d.gathered(model):  # FSDP: the whole policy on every rank, whose row counts and lengths differ
        for s in range(0, max(1, len(prompts)), step_rows):
            kw = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, row_seeds=seeds[s: s + step_rows])
            ps = prompts[s: s + step_rows]
            if ps and not isinstance(ps[0], str):
                parts.append(sample(model, tok, prompt_ids=[list(p) for p in ps], **kw))
            else:
                parts.append(sample(model, tok, ps, **kw))
    return mine, parts[0] if len(parts) == 1 else concat_rollouts(parts, tok.pad_token_id)


# ------------------------------------------------------------------------------ the run around the steps

@dataclasses.dataclass
class RunState:
    """What the bookkeeping of one run carries between the kit's calls (plain data)."""

    run: RunDir
    d: Dist
    start: int  # the first step to run (> 0 after a resume)
    extra: dict  # the checkpoint's extra state (e.g. OPD's adaptive KL coefficient)
    log: Any  # metrics.jsonl writer (main rank) or None
    bar: Any  # tqdm bar, LineProgress, or None
    t_start: float
    first_eval: dict | None = None
    samples: Any = None  # samples.jsonl writer (main rank) or None
    trackers: list = dataclasses.field(default_factory=list)  # accelerate trackers (report_to)
    model: Any = None  # the policy (gathered on every rank for evaluation under FSDP)


def open_run(cfg, d: Dist | None = None) -> tuple[Dist, RunDir]:
    """Threads, the process group and the run directory of ``cfg`` (``threads``, ``out``, ``overwrite``).

    Call it only after the inputs loaded and validated: it writes ``config.json``. A finished run
    with the same config says so on stderr (and the caller returns its summary)."""
    set_threads(cfg.threads)
    d = d or Dist(cfg)  # the launcher's settings (strategy, mixed precision) apply to cfg before config.json
    run = open_run_dir(cfg.out, to_dict(cfg), cfg.overwrite, d)
    if run.done and d.is_main:
        print(f"run {run.path} is already finished ({cfg.steps} steps); returning its summary "
              "(overwrite=true to start over)", file=sys.stderr)
    return d, run


def resume(run: RunDir, model, opt, d: Dist, steps: int, desc: str, progress: bool, report_to: str = "") -> RunState:
    """Load the latest checkpoint (if any) into ``model``/``opt``; open metrics.jsonl, samples.jsonl,
    the trackers and the progress bar. A resume says from which step it continues (call it after ``d.wrap``)."""
    start, extra = 0, {}
    if (ck := run.latest_checkpoint()) is not None:
        start, extra = run.load_trainer_state(ck, model, opt)
        if d.is_main:
            print(f"resuming {run.path} after step {start} (checkpoint {ck.name})", file=sys.stderr)
    log = run.metrics_writer(start) if d.is_main else None
    samples = None
    if d.is_main:
        truncate_jsonl(run.path / "samples.jsonl", lambda r: r.get("step", -1) <= start)
        samples = JsonlWriter(run.path / "samples.jsonl")
    trackers = make_trackers(report_to, run, run.config) if d.is_main else []
    bar = progress_bar(steps, start, desc) if progress and d.is_main else None
    return RunState(run, d, start, extra, log, bar, time.time(), samples=samples, trackers=trackers, model=model)


SAMPLES_RULES = {"samples_n": (lambda c: c.samples_every > 0, "with samples_every > 0")}  # config.check_dependent
CHECKPOINT_RULES = {"keep_checkpoints": (lambda c: c.save_every > 0, "with checkpoints (save_every > 0)")}


def samples_due(st: RunState, step: int, every: int) -> bool:
    """Whether step index ``step`` writes ``samples.jsonl`` rows: every ``every`` steps and the first (main rank)."""
    return st.samples is not None and every > 0 and step % every == 0


def write_samples(st: RunState, step: int, every: int, make_rows: Callable[[], list[dict]]) -> None:
    """When :func:`samples_due`, append ``make_rows()`` to ``samples.jsonl``."""
    if samples_due(st, step, every):
        for r in make_rows():
            st.samples.write(r)


def samples_rows(step: int, examples: list, texts: list[str], rewards: dict[str, list[float]] | None,
                 adv: list[float] | None, n: int, extra: dict[str, list] | None = None) -> list[dict]:
    """The first ``n`` rollouts of step index ``step`` as ``samples.jsonl`` rows (``step`` written 1-based)."""
    out = []
    for b in range(min(n, len(texts))):
        e = examples[b]
        row = {"step": step + 1, "prompt": e.prompt, "answer": e.answer, "completion": texts[b]}
        for name, vals in (rewards or {}).items():
            v = vals[b]
            row[f"reward/{name}" if name != "total" else "reward"] = None if math.isnan(v) else v
        if adv is not None:
            row["advantage"] = adv[b]
        for k, vals in (extra or {}).items():
            row[k] = vals[b]
        out.append(row)
    return out


def first_eval(st: RunState, eval_fn: Callable[[], dict] | None, **keys) -> None:
    """Evaluate before the first step of a fresh run (main rank) and log it as step 0 (plus ``keys``)."""
    if eval_fn is not None and st.start == 0 and (ev := st.d.main_only(eval_fn, st.model)) is not None:
        st.first_eval = {"step": 0, **keys, **ev}
        st.log.write(st.first_eval)


def log_step(st: RunState, step: int, row: dict, steps: int, eval_every: int, eval_fn: Callable[[], dict] | None,
             **postfix) -> None:
    """Write ``row`` as step ``step + 1`` (the updates done; ``row`` has no ``step``), with the periodic
    (and final) evaluation added to it; advance the bar."""
    if "step" in row:
        raise ValueError("log_step numbers the row itself (step + 1): leave 'step' out of it")
    if eval_fn is not None and ((step + 1) % eval_every == 0 or step + 1 == steps):
        row.update(st.d.main_only(eval_fn, st.model) or {})  # every rank takes part (FSDP gathers the policy)
    if st.log:
        st.log.write({"step": step + 1, **row})
    for t in st.trackers:
        t.log({k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "step"}, step=step + 1)
    if st.bar:
        if postfix:  # before the update, so a log line shows this step's values
            st.bar.set_postfix(**postfix, refresh=False) if not isinstance(st.bar, LineProgress) else \
                st.bar.set_postfix(**postfix)
        st.bar.update(1)


def checkpoint(st: RunState, step: int, steps: int, save_every: int, model, tok, opt, extra=None) -> None:
    """Every ``save_every`` steps (not the last), a resumable checkpoint (``extra``: a dict, or a function of none)."""
    if save_every and (step + 1) % save_every == 0 and step + 1 < steps:
        st.run.save_checkpoint(step + 1, model, tok, opt, extra=extra() if callable(extra) else extra, d=st.d)
        st.d.barrier()


def close_run(st: RunState, model, tok, summary: dict, row: dict) -> dict:
    """Record the first/last greedy accuracy in ``summary``, write the final model, DONE and the summary."""
    if st.bar:
        st.bar.close()
    if st.first_eval and "eval/greedy_acc" in st.first_eval:
        summary["initial_greedy_acc"] = st.first_eval["eval/greedy_acc"]
    if "eval/greedy_acc" in row:
        summary["final_greedy_acc"] = row["eval/greedy_acc"]
    summary.update(st.d.summary())  # dist/strategy: what actually ran
    state = full_state_dict(model) if st.d.strategy == "fsdp" else None  # every rank takes part
    if st.d.is_main:
        if st.log:
            st.log.close()
        if st.samples:
            st.samples.close()
        for t in st.trackers:
            t.finish()
        st.run.finish(model, tok, summary, state)
    st.d.barrier()
    return summary
