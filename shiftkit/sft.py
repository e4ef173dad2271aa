"""Supervised fine-tuning: one readable loop.

Data comes through :mod:`shiftkit.data` (``data=``): TRL's prompt/completion, ``messages`` or
plain ``text`` rows from a file, dataset directory or cached hub id, rendered by
:mod:`shiftkit.prompts` (the chat template when the tokenizer has one) and cut to ``max_length``;
or ``data=arith:add,mul`` (``tasks=add,mul``), the toy world's traces generated per step from
``(seed, step)`` with the systematic-mistake rate ``error_rate``. The loss is token-mean
cross-entropy on completion tokens only (the EOS / end-of-turn included).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from shiftkit import logprobs, losses, microbatch
from shiftkit import loopkit as kit
from shiftkit.config import check_dependent
from shiftkit.data import CompletionKey, DataKeys, HeldOutKeys, is_arith
from shiftkit.dist import Dist, set_threads
from shiftkit.errors import ShiftkitError
from shiftkit.evaluate import task_eval_fn
from shiftkit.inputs import sft_inputs
from shiftkit.models import STRONG_SPEC, WEAK_SPEC, check_vocab, load_policy, make_char_tokenizer, make_tiny_model
from shiftkit.models import prepare_policy
from shiftkit.prompts import CHAT_TEMPLATE_RULES, PromptKeys, left_pad, right_pad
from shiftkit.runs import KEEP_CHECKPOINTS
from shiftkit.tasks import Mixture


@dataclasses.dataclass
class SFTConfig(microbatch.MemoryConfig, DataKeys, CompletionKey, HeldOutKeys, PromptKeys):
    """``shiftkit sft``: the keys below, plus the shared memory, data and prompt groups."""

    model: str = ""  # HF model dir / cached hub id to fine-tune; or empty with init=weak|strong
    init: str = ""  # create a tiny model from scratch: weak | strong (the toy world)
    out: str = "runs/sft"  # run directory (config.json, metrics.jsonl, checkpoints/, final/)
    max_length: int = 2048  # prompt + completion tokens; longer completions are cut, longer prompts dropped
    error_rate: float = 0.6  # arith data: share of traces with the systematic mistake
    # -- optimisation --
    steps: int = 600  # optimizer steps
    batch_size: int = 64  # rows per step
    lr: float = 2e-5  # peak learning rate (AdamW)
    warmup: int = 50  # linear warm-up steps
    schedule: str = "cosine"  # constant | cosine | linear (after warm-up)
    weight_decay: float = 0.01  # AdamW weight decay on matrices
    grad_clip: float = 1.0  # gradient-norm clip (0 = off)
    seed: int = 0  # every draw is a function of (seed, step)
    save_every: int = 100  # resumable checkpoint every N steps (0 = only the final model)
    keep_checkpoints: int = KEEP_CHECKPOINTS  # checkpoints kept, also after the run finishes: the last N (0 = none, -1 = all)
    eval_every: int = 0  # every N steps: greedy accuracy (arith data) or eval/loss (eval_split); 0 = off
    eval_n: int = 100  # arith data: held-out problems per domain for periodic eval
    max_new_tokens: int = 48  # arith data: completion limit of the periodic greedy eval
    report_to: str = "none"  # none | tensorboard | wandb (through accelerate's trackers)
    threads: int = 0  # torch threads (0 = torch's default)
    overwrite: bool = False  # replace an existing out directory
    progress: bool = True  # progress bar (periodic log lines when stderr is not a terminal)

    def validate(self) -> None:
        if not self.model and self.init not in ("weak", "strong"):
            raise ShiftkitError("sft needs model=<path or hub id> or init=weak|strong")
        if self.model and self.init:
            raise ShiftkitError("sft: give model=... (fine-tune) or init=weak|strong (a new tiny model), not both")
        if self.steps <= 0 or self.batch_size <= 0:
            raise ShiftkitError("sft: steps and batch_size must be positive")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ShiftkitError(f"sft: error_rate must be in [0, 1], got {self.error_rate}")
        kit.check_report_to(self.report_to)
        self.validate_memory("sft")
        check_dependent(self, {**CHAT_TEMPLATE_RULES, **kit.CHECKPOINT_RULES}, "sft")
        if self.rollout_rows:
            raise ShiftkitError("sft: rollout_rows does not apply (SFT samples nothing); leave it at 0")
        if self.packing:
            raise ShiftkitError("sft: packing is not supported here yet (rl, opd and agent train pack); leave it false")
        self.check_data("sft")
        arith = bool(self.tasks) or is_arith(self.data)
        if self.data and not arith and self.error_rate != 0.6:
            raise ShiftkitError(f"sft: data={self.data} does not read error_rate (it applies to arith traces only)")
        if self.data and not arith and (self.eval_n != 100 or self.max_new_tokens != 48):
            raise ShiftkitError(f"sft: data={self.data} does not read eval_n / max_new_tokens (arith eval only)")


def _init_model(cfg: SFTConfig, device):
    if cfg.model:
        return load_policy(cfg.model, device)
    tok = make_char_tokenizer()
    model = make_tiny_model(WEAK_SPEC if cfg.init == "weak" else STRONG_SPEC, vocab_size=len(tok), seed=cfg.seed)
    check_vocab(model, tok)
    return model, tok


def encode_batch(inp, rows, max_length: int, device):
    """Prompt (left-padded) and completion (right-padded) ids of SFT rows, and the truncation counts."""
    enc, stats = inp.renderer.encode_sft_batch(rows, max_length)
    pad = inp.renderer.tok.pad_token_id
    p_ids, p_mask = left_pad([e.prompt_ids for e in enc], pad, device)
    c_ids, c_mask = right_pad([e.completion_ids for e in enc], pad, device)
    return p_ids, p_mask, c_ids, c_mask, stats


def run_sft(cfg: SFTConfig) -> dict:
    set_threads(cfg.threads)
    d = Dist(cfg)  # the launcher's strategy and settings (mixed precision -> autocast), before config.json
    torch.manual_seed(cfg.seed)
    model, tok = _init_model(cfg, d.device)
    inp = sft_inputs(cfg, tok, cfg.model)
    d, run = kit.open_run(cfg, d)  # nothing is written before the model and data load and validate
    if run.done:
        return run.summary()
    model = prepare_policy(model.to(d.device), cfg)  # LoRA adapters, activation checkpointing
    model.train()
    ddp_model = d.wrap(model)  # DDP wrapper, or FSDP2: `model` sharded in place (before the optimizer)
    opt = kit.make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = kit.resume(run, model, opt, d, cfg.steps, f"sft {Path(cfg.out).name}", cfg.progress, cfg.report_to)
    eval_fn = _eval_fn(cfg, model, tok, inp, d) if cfg.eval_every else None
    dtype = microbatch.autocast_dtype(cfg.autocast)
    row: dict = {}
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        batch = d.shard(inp.ds.draw_sft(cfg.seed, step, cfg.batch_size))
        p_ids, p_mask, c_ids, c_mask, cut = encode_batch(inp, batch, cfg.max_length if not inp.arith else 0, d.device)
        n_tok = d.sum(c_mask.sum())
        mbs = microbatch.micro_batches(p_mask, c_mask, cfg.token_budget, d=d)
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        opt.zero_grad(set_to_none=True)
        loss_sum = torch.zeros(())
        for mb in microbatch.accumulating(ddp_model, mbs):  # no_sync until the last micro-batch
            ids_bt, m_bt = mb.completion(c_ids), mb.completion(c_mask)
            head = logprobs.model_head(ddp_model, mb.prompt(p_ids), mb.prompt(p_mask), ids_bt, m_bt, dtype=dtype)
            loss = losses.sft_loss_from_logprobs(logprobs.token_logprobs(head, ids_bt, cfg.logit_chunk or None), m_bt,
                                                 num_tokens=n_tok) * mb.scale
            (loss * d.world).backward()  # a global-count mean: summed over micro-batches and ranks
            loss_sum = loss_sum + loss.detach().float().cpu()
        gnorm = kit.clip_and_step(model, opt, cfg.grad_clip)
        loss = d.sum(loss_sum)  # the global mean (each rank's share is normalised by the global count)
        row = {"loss": float(loss), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "micro_batches": len(mbs), "step_time": time.time() - t0}
        if not inp.arith:
            row.update({"rows_truncated": cut["truncated"], "rows_dropped": cut["dropped"]})
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn, loss=f"{row['loss']:.3f}")
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt)
    summary = {"out": str(run.final), "steps": cfg.steps, "final_loss": row.get("loss"),
               "train_seconds": time.time() - st.t_start}
    return kit.close_run(st, model, tok, summary, row)


def _eval_fn(cfg: SFTConfig, model, tok, inp, d):
    if inp.arith:
        return task_eval_fn(model, tok, [e.problem for e in inp.eval_items], Mixture(inp.ds.names).reward,
                            cfg.max_new_tokens)
    if getattr(inp.ds, "eval", None) is None:
        return None
    rows = list(inp.ds.eval.items)

    @torch.no_grad()
    def eval_fn() -> dict:
        tot, n = 0.0, 0
        for s in range(0, len(rows), cfg.batch_size):
            p_ids, p_mask, c_ids, c_mask, _ = encode_batch(inp, rows[s: s + cfg.batch_size], cfg.max_length, d.device)
            k = int(c_mask.sum())
            mbs = microbatch.micro_batches(p_mask, c_mask, cfg.token_budget)
            lp = logprobs.score_mb(model, p_ids, p_mask, c_ids, c_mask, mbs, chunk=cfg.logit_chunk)
            tot += float(losses.sft_loss_from_logprobs(lp, c_mask, num_tokens=torch.tensor(k))) * k
            n += k
        return {"eval/loss": tot / max(n, 1)}

    return eval_fn
