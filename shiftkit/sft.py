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

from shiftkit import losses
from shiftkit.config import to_dict
from shiftkit.dist import Dist, unwrap
from shiftkit.errors import ShiftkitError
from shiftkit.io import read_jsonl
from shiftkit.runs import RunDir
from shiftkit.sampling import encode_completions, encode_prompts, forward_logits
from shiftkit.train_common import grad_norm_clip, lr_at, make_optimizer, set_lr, set_threads


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
    from shiftkit.evaluate import evaluate_model
    from shiftkit.tasks import Mixture, eval_set

    set_threads(cfg.threads)
    d = Dist()
    rows = _load_rows(cfg.data) if cfg.data else None
    mixture = Mixture(cfg.tasks)
    run = RunDir(cfg.out, to_dict(cfg), overwrite=cfg.overwrite)
    if run.done:
        return run.summary()
    torch.manual_seed(cfg.seed)
    model, tok = _init_model(cfg)
    model.to(d.device).train()
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    start = 0
    if (ck := run.latest_checkpoint()) is not None:
        start, _ = run.load_trainer_state(ck, model, opt)
    ddp_model = d.wrap(model)
    log = run.metrics_writer(start) if d.is_main else None
    evals = eval_set(cfg.tasks, cfg.eval_n) if (cfg.eval_every and rows is None) else []
    bar = None
    if cfg.progress and d.is_main:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=start, desc=f"sft {Path(cfg.out).name}", leave=False)
    t_start = time.time()
    for step in range(start, cfg.steps):
        t0 = time.time()
        batch = d.shard(batch_for_step(cfg, step, rows, mixture))
        p_ids, p_mask = encode_prompts(tok, [p for p, _ in batch], d.device)
        c_ids, c_mask = encode_completions(tok, [c for _, c in batch], add_eos=True, device=d.device)
        n_tok = d.sum(c_mask.sum())
        logits_BTV = forward_logits(ddp_model, p_ids, p_mask, c_ids, c_mask)
        loss = losses.sft_loss(logits_BTV, c_ids, c_mask, num_tokens=n_tok) * d.world
        set_lr(opt, lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = grad_norm_clip(model, cfg.grad_clip)
        opt.step()
        row = {"step": step, "loss": float(loss.detach()) / d.world, "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "step_time": time.time() - t0}
        if evals and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps) and d.is_main:
            ev = evaluate_model(unwrap(model), tok, evals, mixture.reward, max_new_tokens=cfg.max_new_tokens)
            row.update({f"eval/{k}": v for k, v in ev.items() if k != "per_problem"})
        if log:
            log.write(row)
        if bar:
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}")
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            if d.is_main:
                run.save_checkpoint(step + 1, model, tok, opt)
            d.barrier()
    if bar:
        bar.close()
    summary = {"out": str(run.final), "steps": cfg.steps, "final_loss": row["loss"] if cfg.steps > start else None,
               "train_seconds": time.time() - t_start}
    if d.is_main:
        if log:
            log.close()
        run.finish(model, tok, summary)
    d.barrier()
    return summary
