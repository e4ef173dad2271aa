"""The training kit: the bookkeeping every loop shares, as plain functions (no trainer class, no callbacks).

A loop (``sft.py``, ``rl.py``, ``opd/loop.py``, ``agent/rl.py``) keeps its step body inline and
calls these around it::

    d, run = open_run(cfg)                      # threads, Dist, RunDir (a finished run returns its summary)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = resume(run, model, opt, d, cfg.steps, desc, cfg.progress)   # checkpoint, metrics.jsonl, progress bar
    first_eval(st, eval_fn)                    # step-0 evaluation of a fresh run
    for step in range(st.start, cfg.steps):
        mine, roll = rollout(model, tok, prompts_P, G, cfg.seed, step, d, ...)   # the one seed formula
        ... the algorithm ...
        gnorm = optimizer_step(loss, model, opt, d, cfg.grad_clip, skip=not has_signal)
        log_step(st, step, row, cfg.steps, eval_every, eval_fn)
        checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt)
    return close_run(st, model, tok, summary, row)

Every random draw is a function of ``(seed, step)`` (:func:`draw_prompts`, :func:`row_seed`), so a
checkpoint holds only weights, optimizer state, the step and a small ``extra`` dict, and a resumed
run continues bit for bit. No algorithm math lives here.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from shiftkit.config import to_dict
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.runs import RunDir, open_run_dir
from shiftkit.sampling import sample

# ------------------------------------------------------------------------------ optimizer and schedule


def set_threads(n: int) -> None:
    """Use ``n`` torch threads (0 = leave torch's default). Data-parallel workers should use 1."""
    if n > 0:
        torch.set_num_threads(n)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.98)) -> torch.optim.Optimizer:
    """AdamW; matrices decay, vectors (norms, biases) do not; shared parameters appear once.

    The fused kernel (CPU and CUDA; what TRL's default ``adamw_torch_fused`` uses): no per-step
    temporaries, where the ``foreach`` path allocates about one parameter-sized copy (measured 504 MB
    transient on SmolLM2-135M)."""
    decay, no_decay = [], []
    seen = set()
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
    params = [p for p in model.parameters() if p.grad is not None]
    if not params:
        return 0.0
    if max_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    return float(torch.norm(torch.stack([p.grad.detach().norm() for p in params])))


def optimizer_step(loss: torch.Tensor, model: torch.nn.Module, opt: torch.optim.Optimizer, d: Dist,
                   grad_clip: float, skip: bool = False) -> float:
    """Backward (scaled by the world size: losses use global counts), clip, step; returns the grad norm.

    ``skip`` (the no-signal guard): a batch that carries no information (every advantage 0, no KL)
    still has its gradient computed, but Adam does not step on it -- its momentum would move the
    policy on zero gradients.
    """
    opt.zero_grad(set_to_none=True)
    (loss * d.world).backward()
    return _clip_and_step(model, opt, grad_clip, skip)


def micro_step(model: torch.nn.Module, ddp_model: torch.nn.Module, opt: torch.optim.Optimizer, d: Dist, mbs: list,
               loss_fn: Callable, grad_clip: float, skip: bool = False) -> tuple[torch.Tensor, float]:
    """:func:`optimizer_step` over micro-batches: ``backward()`` of ``loss_fn(mb)`` for each
    (:func:`shiftkit.microbatch.accumulate`; ``loss_fn`` normalises by the global counts, so the
    accumulated gradient is the full batch's), then one clip and one step. Returns ``(loss, grad norm)``."""
    from shiftkit.microbatch import accumulate

    opt.zero_grad(set_to_none=True)
    loss = accumulate(ddp_model, mbs, loss_fn, d.world)
    return loss, _clip_and_step(model, opt, grad_clip, skip)


def _clip_and_step(model, opt, grad_clip: float, skip: bool) -> float:
    gnorm = grad_norm_clip(model, grad_clip)
    if not skip:
        opt.step()
    return gnorm


# ------------------------------------------------------------------------------ memory: LoRA, checkpointing, scoring


def prepare_policy(model: torch.nn.Module, mem) -> torch.nn.Module:
    """The trainable policy per the run's memory keys (:class:`shiftkit.microbatch.MemoryConfig`):
    LoRA adapters through PEFT (``lora_r > 0``; the base is frozen) and activation checkpointing."""
    from shiftkit.microbatch import set_gradient_checkpointing

    if mem.lora_r:
        try:
            import peft
        except ImportError:
            raise ShiftkitError("lora_r > 0 needs peft: pip install peft") from None
        targets = mem.lora_targets[0] if mem.lora_targets == ["all-linear"] else list(mem.lora_targets)
        lcfg = peft.LoraConfig(r=mem.lora_r, lora_alpha=mem.lora_alpha or 2 * mem.lora_r,
                               lora_dropout=mem.lora_dropout, target_modules=targets, bias="none",
                               task_type="CAUSAL_LM")
        try:
            model = peft.get_peft_model(model, lcfg)
        except ValueError as e:
            raise ShiftkitError(f"lora_targets={mem.lora_targets}: {str(e).splitlines()[0]}") from None
    if mem.grad_checkpointing:
        set_gradient_checkpointing(model, True)
    return model


class AdapterOff:
    """The frozen base of a LoRA policy as a scorer: each call runs with the adapters disabled, so
    the KL reference / anchor costs no second copy of the weights."""

    def __init__(self, peft_model) -> None:
        self.m = peft_model

    def __call__(self, *args, **kw):
        with torch.no_grad(), self.m.disable_adapter():
            return self.m(*args, **kw)

    def get_output_embeddings(self):
        return self.m.get_output_embeddings()

    @property
    def config(self):
        return self.m.config


def frozen_copy(model: torch.nn.Module, mem):
    """The run's reference (KL anchor) at the starting weights: the LoRA policy with its adapters off,
    else a frozen deep copy."""
    import copy

    if getattr(mem, "lora_r", 0):
        return AdapterOff(model)
    return copy.deepcopy(model).eval().requires_grad_(False)


@torch.no_grad()
def score_mb(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, mbs: list, *,
             dtype=None, temperature: float = 1.0, chunk: int = 0) -> torch.Tensor:
    """Per-token log-probs ``[B, T]`` (0 at padding) scored micro-batch by micro-batch through the
    chunked head (:func:`shiftkit.logprobs.score`): memory of one micro-batch, never ``[B, T, V]``."""
    from shiftkit import logprobs as LP
    from shiftkit.microbatch import per_micro_batch

    return per_micro_batch(mbs, completion_ids_BT, lambda mb: LP.score(
        model, mb.prompt(prompt_ids_BP), mb.prompt(prompt_mask_BP), mb.completion(completion_ids_BT),
        mb.completion(completion_mask_BT), dtype=dtype or "float32", temperature=temperature, chunk=chunk or None))


# ------------------------------------------------------------------------------ the draws of one step


def row_seed(seed: int, step: int, prompt_idx: int, sample_idx: int) -> int:
    """The sampling seed of one rollout; independent of how rows are batched or sharded."""
    return (seed * 1_000_003 + step * 10_007 + prompt_idx * 101 + sample_idx) % (2**62)


def draw_prompts(draw_one: Callable[[random.Random], Any], seed: int, step: int, n: int) -> list:
    """``n`` training prompts (or problems) of one step, drawn by ``draw_one(rng)`` from ``(seed, step)``.

    Every loop draws through here, so GRPO and OPD on the same seed see the same prompts.
    """
    rng = random.Random(f"rl:{seed}:{step}")
    return [draw_one(rng) for _ in range(n)]


def needs_old_logprobs(clip_low: float, clip_high: float, ppo_epochs: int, top_p: float = 1.0) -> bool:
    """Whether the update needs log-probs scored before it (PPO's "old" policy) rather than the
    detached log-probs of its own forward: with a clip, several epochs, or a truncated sampler."""
    return bool(clip_low) or bool(clip_high) or ppo_epochs > 1 or top_p < 1.0


def rollout(model, tok, prompts_P: list, group_size: int, seed: int, step: int, d: Dist, *,
            max_new_tokens: int, temperature: float, top_p: float = 1.0, rows: int = 0):
    """``group_size`` samples of this rank's share of the prompts, each row seeded by :func:`row_seed`.

    A prompt is a string or its token ids (what :meth:`shiftkit.prompts.PromptRenderer.ids` gives).
    Returns ``(mine, roll)``: the prompt indices this rank took and the :class:`~shiftkit.sampling.Rollouts`
    (row ``k * G + j`` is sample ``j`` of prompt ``mine[k]``). ``rows`` > 0 samples at most that many
    rows at once (the KV cache of ``rows`` sequences); every row has its own seed, so the tokens do
    not depend on it.
    """
    from shiftkit.sampling import concat_rollouts

    mine = d.shard(list(range(len(prompts_P))))
    prompts = [prompts_P[i] for i in mine for _ in range(group_size)]
    seeds = [row_seed(seed, step, i, j) for i in mine for j in range(group_size)]
    step_rows = rows or max(1, len(prompts))
    parts = []
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


def open_run(cfg, d: Dist | None = None) -> tuple[Dist, RunDir]:
    """Threads, the process group and the run directory of ``cfg`` (``threads``, ``out``, ``overwrite``).

    Call it only after the inputs loaded and validated: it writes ``config.json``. A finished run
    with the same config says so on stderr (and the caller returns its summary)."""
    set_threads(cfg.threads)
    d = d or Dist()
    run = open_run_dir(cfg.out, to_dict(cfg), cfg.overwrite, d)
    if run.done and d.is_main:
        print(f"run {run.path} is already finished ({cfg.steps} steps); returning its summary "
              "(overwrite=true to start over)", file=sys.stderr)
    return d, run


class LineProgress:
    """A progress bar for non-terminals: one log line every ``every`` steps (or 30 s), no carriage returns."""

    def __init__(self, total: int, initial: int, desc: str, stream=None):
        self.total, self.n, self.desc = total, initial, desc
        self.every = max(1, total // 20)
        self.stream = stream or sys.stderr
        self.postfix: dict = {}
        self.t0 = self.t_last = time.time()

    def update(self, n: int = 1) -> None:
        mark = self.n // self.every
        self.n += n
        now = time.time()
        if self.n // self.every > mark or self.n >= self.total or now - self.t_last > 30:
            self.t_last = now
            extra = " ".join(f"{k}={v}" for k, v in self.postfix.items())
            print(f"{self.desc}: step {self.n}/{self.total} ({now - self.t0:.0f}s) {extra}".rstrip(),
                  file=self.stream, flush=True)

    def set_postfix(self, **kw) -> None:
        self.postfix = kw

    def close(self) -> None:
        pass


def progress_bar(total: int, initial: int, desc: str, stream=None):
    """tqdm on a terminal, :class:`LineProgress` otherwise (a redirected log stays line-based)."""
    stream = stream or sys.stderr
    if getattr(stream, "isatty", lambda: False)():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, leave=False, file=stream)
    return LineProgress(total, initial, desc, stream)


def check_report_to(report_to: str) -> None:
    """Fail at config time (before anything is written) when a requested tracker cannot be made."""
    import importlib.util

    names = [n.strip() for n in (report_to or "").split(",") if n.strip() and n.strip() != "none"]
    for n in names:
        if n not in ("tensorboard", "wandb"):
            raise ShiftkitError(f"report_to={n}: use tensorboard, wandb or none")
        if importlib.util.find_spec("accelerate") is None:
            raise ShiftkitError(f"report_to={report_to} needs accelerate: pip install accelerate")
        mods = ("tensorboard", "tensorboardX") if n == "tensorboard" else ("wandb",)
        if not any(importlib.util.find_spec(m) is not None for m in mods):
            raise ShiftkitError(f"report_to={n} needs the {n} package: pip install {n}")


def make_trackers(report_to: str, run: RunDir, config: dict) -> list:
    """accelerate's trackers for ``report_to=tensorboard|wandb`` (comma-separated; "" or none = off)."""
    names = [n.strip() for n in (report_to or "").split(",") if n.strip() and n.strip() != "none"]
    if not names:
        return []
    try:
        from accelerate import tracking
    except ImportError:
        raise ShiftkitError(f"report_to={report_to} needs accelerate: pip install accelerate") from None
    out = []
    for n in names:
        if n == "tensorboard":
            try:
                import tensorboard  # noqa: F401
            except ImportError:
                try:
                    import tensorboardX  # noqa: F401
                except ImportError:
                    raise ShiftkitError("report_to=tensorboard needs tensorboard: pip install tensorboard") from None
            t = tracking.TensorBoardTracker(run.path.name, str(run.path / "tensorboard"))
        elif n == "wandb":
            try:
                import wandb  # noqa: F401
            except ImportError:
                raise ShiftkitError("report_to=wandb needs wandb: pip install wandb") from None
            t = tracking.WandBTracker(run.path.name)
        else:
            raise ShiftkitError(f"report_to={n}: use tensorboard, wandb or none")
        if hasattr(t, "start"):  # accelerate >= 1.x opens the writer / run in start() (Accelerator.init_trackers does)
            t.start()
        t.store_init_configuration({k: v for k, v in config.items() if isinstance(v, (int, float, str, bool))})
        out.append(t)
    return out


def resume(run: RunDir, model, opt, d: Dist, steps: int, desc: str, progress: bool, report_to: str = "") -> RunState:
    """Load the latest checkpoint (if any) into ``model``/``opt``; open metrics.jsonl, samples.jsonl,
    the trackers and the progress bar. A resume says from which step it continues."""
    from shiftkit.io import JsonlWriter, truncate_jsonl

    start, extra = 0, {}
    if (ck := run.latest_checkpoint()) is not None:
        start, extra = run.load_trainer_state(ck, model, opt)
        if d.is_main:
            print(f"resuming {run.path} from step {start} (checkpoint {ck.name})", file=sys.stderr)
    log = run.metrics_writer(start) if d.is_main else None
    samples = None
    if d.is_main:
        truncate_jsonl(run.path / "samples.jsonl", lambda r: r.get("step", -1) < start)
        samples = JsonlWriter(run.path / "samples.jsonl")
    trackers = make_trackers(report_to, run, run.config) if d.is_main else []
    bar = progress_bar(steps, start, desc) if progress and d.is_main else None
    return RunState(run, d, start, extra, log, bar, time.time(), samples=samples, trackers=trackers)


def write_samples(st: RunState, step: int, every: int, make_rows: Callable[[], list[dict]]) -> None:
    """Every ``every`` steps (and the first), append ``make_rows()`` to ``samples.jsonl`` (main rank)."""
    if st.samples is not None and every > 0 and (step % every == 0):
        for r in make_rows():
            st.samples.write(r)


def first_eval(st: RunState, eval_fn: Callable[[], dict] | None, **keys) -> None:
    """Evaluate before the first step of a fresh run (main rank) and log it as step 0 (plus ``keys``)."""
    if eval_fn is not None and st.start == 0 and st.d.is_main:
        st.first_eval = {"step": 0, **keys, **eval_fn()}
        st.log.write(st.first_eval)


def log_step(st: RunState, step: int, row: dict, steps: int, eval_every: int, eval_fn: Callable[[], dict] | None,
             **postfix) -> None:
    """Add the periodic (and final) evaluation to ``row``, write it, advance the bar."""
    if eval_fn is not None and st.d.is_main and ((step + 1) % eval_every == 0 or step + 1 == steps):
        row.update(eval_fn())
    if st.log:
        st.log.write(row)
    for t in st.trackers:
        t.log({k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "step"}, step=step)
    if st.bar:
        if postfix:  # before the update, so a log line shows this step's values
            st.bar.set_postfix(**postfix, refresh=False) if not isinstance(st.bar, LineProgress) else \
                st.bar.set_postfix(**postfix)
        st.bar.update(1)


def checkpoint(st: RunState, step: int, steps: int, save_every: int, model, tok, opt, extra: dict | None = None) -> None:
    """Every ``save_every`` steps (not after the last one), save a resumable checkpoint (main rank)."""
    if save_every and (step + 1) % save_every == 0 and step + 1 < steps:
        if st.d.is_main:
            st.run.save_checkpoint(step + 1, model, tok, opt, extra=extra)
        st.d.barrier()


def close_run(st: RunState, model, tok, summary: dict, row: dict) -> dict:
    """Record the first/last greedy accuracy in ``summary``, write the final model, DONE and the summary."""
    if st.bar:
        st.bar.close()
    if st.first_eval and "eval/greedy_acc" in st.first_eval:
        summary["initial_greedy_acc"] = st.first_eval["eval/greedy_acc"]
    if "eval/greedy_acc" in row:
        summary["final_greedy_acc"] = row["eval/greedy_acc"]
    if st.d.is_main:
        if st.log:
            st.log.close()
        if st.samples:
            st.samples.close()
        for t in st.trackers:
            t.finish()
        st.run.finish(model, tok, summary)
    st.d.barrier()
    return summary


def held_out_eval(model, tok, evals: list, reward_fn, max_new_tokens: int) -> Callable[[], dict] | None:
    """``eval_fn`` for the kit: greedy accuracy on ``evals`` as ``eval/...`` keys (None without evals)."""
    if not evals:
        return None
    from shiftkit.evaluate import evaluate_model

    def eval_fn() -> dict:
        ev = evaluate_model(model, tok, evals, reward_fn, max_new_tokens=max_new_tokens)
        return {f"eval/{k}": v for k, v in ev.items() if k != "per_problem"}

    return eval_fn

