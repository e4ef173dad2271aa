"""Supervised fine-tuning: one readable loop.

Data is either the toy world's traces (generated per step from ``(seed, step)``, with the
systematic-mistake rate ``error_rate``) or a JSONL file of ``{"prompt", "completion"}`` rows. The
loss is token-mean cross-entropy on completion tokens only (the EOS included).
"""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path

import torch

from shiftkit import loopkit as kit
from shiftkit import losses
from shiftkit.errors import ShiftkitError
from shiftkit.io import read_jsonl
from shiftkit.sampling import encode_completions, encode_prompts, forward_logits


@dataclasses.dataclass
class SFTConfig:
    model: str = ""  # HF model dir / hub id to fine-tune; or empty with init=weak|strong
    init: str = ""  # create a tiny model from scratch: weak | strong
    out: str = "runs/sft"
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    data: str = ""  # JSONL with prompt/completion rows (instead of generated toy traces)
    error_rate: float = 0.6  # share of traces with the systematic mistake (toy data only)
    steps: int = 600
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 50
    schedule: str = "cosine"
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    save_every: int = 0
    eval_every: int = 0
    eval_n: int = 100  # held-out problems per domain for periodic eval
    max_new_tokens: int = 48
    threads: int = 0
    overwrite: bool = False
    progress: bool = True

    def validate(self) -> None:
        if not self.model and self.init not in ("weak", "strong"):
            raise ShiftkitError("sft needs model=<path or hub id> or init=weak|strong")
        if self.steps <= 0 or self.batch_size <= 0:
            raise ShiftkitError("sft: steps and batch_size must be positive")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ShiftkitError(f"sft: error_rate must be in [0, 1], got {self.error_rate}")


def _load_rows(path: str) -> list[tuple[str, str]]:
    p = Path(path)
    rows = read_jsonl(p)
    pairs = []
    for i, r in enumerate(rows, 1):
        if "prompt" not in r or "completion" not in r:
            raise ShiftkitError(f"{p}:{i}: each row needs 'prompt' and 'completion'")
        pairs.append((str(r["prompt"]), str(r["completion"])))
    if not pairs:
        raise ShiftkitError(f"dataset {p} is empty")
    return pairs


def _init_model(cfg: SFTConfig):
    from shiftkit.models import STRONG_SPEC, WEAK_SPEC, check_vocab, load_model_and_tokenizer, make_char_tokenizer, make_tiny_model

    if cfg.model:
        return load_model_and_tokenizer(cfg.model)
    tok = make_char_tokenizer()
    model = make_tiny_model(WEAK_SPEC if cfg.init == "weak" else STRONG_SPEC, vocab_size=len(tok), seed=cfg.seed)
    check_vocab(model, tok)
    return model, tok


def batch_for_step(cfg: SFTConfig, step: int, rows, mixture) -> list[tuple[str, str]]:
    rng = random.Random(f"sft:{cfg.seed}:{step}")
    if rows is not None:
        return [rows[rng.randrange(len(rows))] for _ in range(cfg.batch_size)]
    out = []
    for _ in range(cfg.batch_size):
        p = mixture.sample(rng, "train")
        out.append((p.prompt, mixture.trace(p, rng, cfg.error_rate)))
    return out


def run_sft(cfg: SFTConfig) -> dict:
    from shiftkit.tasks import Mixture, eval_set

    rows = _load_rows(cfg.data) if cfg.data else None
    mixture = Mixture(cfg.tasks)
    d, run = kit.open_run(cfg)
    if run.done:
        return run.summary()
    torch.manual_seed(cfg.seed)
    model, tok = _init_model(cfg)
    model.to(d.device).train()
    opt = kit.make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = kit.resume(run, model, opt, d, cfg.steps, f"sft {Path(cfg.out).name}", cfg.progress)
    ddp_model = d.wrap(model)
    evals = eval_set(cfg.tasks, cfg.eval_n) if (cfg.eval_every and rows is None) else []
    eval_fn = kit.held_out_eval(model, tok, evals, mixture.reward, cfg.max_new_tokens)
    row: dict = {}
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        batch = d.shard(batch_for_step(cfg, step, rows, mixture))
        p_ids, p_mask = encode_prompts(tok, [p for p, _ in batch], d.device)
        c_ids, c_mask = encode_completions(tok, [c for _, c in batch], add_eos=True, device=d.device)
        n_tok = d.sum(c_mask.sum())
        logits_BTV = forward_logits(ddp_model, p_ids, p_mask, c_ids, c_mask)
        loss = losses.sft_loss(logits_BTV, c_ids, c_mask, num_tokens=n_tok)
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        gnorm = kit.optimizer_step(loss, model, opt, d, cfg.grad_clip)
        row = {"step": step, "loss": float(loss.detach()), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "step_time": time.time() - t0}
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn, loss=f"{row['loss']:.3f}")
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt)
    summary = {"out": str(run.final), "steps": cfg.steps, "final_loss": row.get("loss"),
               "train_seconds": time.time() - st.t_start}
    return kit.close_run(st, model, tok, summary, row)
