"""GRPO with verifiable rewards: one readable loop.

Per step: draw ``prompts_per_step`` training problems from ``(seed, step)``; sample
``group_size`` completions each (KV-cache sampler, per-row seeds); reward each with the task's
exact checker; group-relative advantages (:func:`shiftkit.advantages.group_advantages`); then
``ppo_epochs`` passes of the shared policy loss (:func:`shiftkit.losses.policy_loss`) with optional
PPO clipping and an optional k3 KL to the reference policy (the starting model). The run directory,
resume, logging and checkpoints are the training kit's (:mod:`shiftkit.loopkit`). Under ``accelerate launch`` each rank takes a strided share
of the prompt groups and losses are normalised by global token/sequence counts, so N processes give
the single-process update.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import torch

from shiftkit import advantages, losses
from shiftkit import loopkit as kit
from shiftkit.errors import ShiftkitError
from shiftkit.sampling import Rollouts, forward_logits, score, token_logprobs


@dataclasses.dataclass
class GRPOConfig:
    model: str = ""  # HF model dir or hub id (the policy's start and the KL reference)
    out: str = "runs/rl"
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    steps: int = 60
    prompts_per_step: int = 16
    group_size: int = 8
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    lr: float = 6e-5
    warmup: int = 0
    schedule: str = "constant"
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    aggregation: str = "token_mean"  # token_mean | seq_mean
    adv_scale: str = "std"  # std (GRPO) | none (Dr. GRPO)
    clip_low: float = 0.0  # PPO clip; 0 = no lower clip (and clip_high 0 too: no clipping, REINFORCE surrogate)
    clip_high: float = 0.0  # 0 = same as clip_low
    ppo_epochs: int = 1
    kl_coef: float = 0.0  # k3 KL to the reference (the starting model); 0 = no reference model
    kl_clamp: bool = True  # clamp the k3 log-ratio to [-20, 20] and the k3 to 10, as verl's low_var_kl
    seed: int = 0
    eval_every: int = 20
    eval_n: int = 100  # held-out problems per domain
    save_every: int = 0
    threads: int = 0
    overwrite: bool = False
    progress: bool = True

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("rl needs model=<path or hub id>")
        if self.steps <= 0 or self.prompts_per_step <= 0 or self.group_size < 2:
            raise ShiftkitError("rl: steps and prompts_per_step must be positive and group_size >= 2")
        if self.aggregation not in losses.AGGREGATIONS:
            raise ShiftkitError(f"rl: aggregation must be token_mean or seq_mean, got '{self.aggregation}'")
        if self.adv_scale not in ("std", "none"):
            raise ShiftkitError(f"rl: adv_scale must be std or none, got '{self.adv_scale}'")


def rollout_stats(roll: Rollouts) -> dict:
    m = roll.completion_mask_BT.float()
    return {"response_len": float(m.sum(-1).mean()), "eos_rate": float(roll.eos_B.float().mean())}


def run_grpo(cfg: GRPOConfig) -> dict:
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import Mixture, eval_set

    mixture = Mixture(cfg.tasks)
    d, run = kit.open_run(cfg)
    if run.done:
        return run.summary()
    model, tok = load_model_and_tokenizer(cfg.model, device=d.device)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    model.train()
    opt = kit.make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = kit.resume(run, model, opt, d, cfg.steps, f"grpo {Path(cfg.out).name}", cfg.progress)
    ddp_model = d.wrap(model)
    eval_fn = kit.held_out_eval(model, tok, eval_set(cfg.tasks, cfg.eval_n) if cfg.eval_every else [],
                                mixture.reward, cfg.max_new_tokens)
    kit.first_eval(st, eval_fn)
    clip_low = cfg.clip_low or None
    clip_high = (cfg.clip_high or cfg.clip_low) or None
    off_policy = kit.needs_old_logprobs(cfg.clip_low, cfg.clip_high, cfg.ppo_epochs, cfg.top_p)
    P, G = cfg.prompts_per_step, cfg.group_size
    row: dict = {}
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        problems = kit.draw_prompts(lambda rng: mixture.sample(rng, "train"), cfg.seed, step, P)
        mine, roll = kit.rollout(model, tok, [p.prompt for p in problems], G, cfg.seed, step, d,
                                 max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
        t_sample = time.time() - t0
        rewards_B = torch.tensor([mixture.reward(problems[i], roll.texts[k * G + j])
                                  for k, i in enumerate(mine) for j in range(G)])
        adv_B = advantages.group_advantages(rewards_B, G, cfg.adv_scale)
        mask_BT = roll.completion_mask_BT
        adv_BT = adv_B[:, None].expand_as(mask_BT).to(d.device)
        args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, mask_BT)
        t1 = time.time()
        old_logp_BT = score(model, *args, temperature=cfg.temperature) if off_policy else None
        ref_logp_BT = score(ref, *args, temperature=cfg.temperature) if ref is not None else None
        t_score = time.time() - t1
        n_tok, n_seq = d.sum(mask_BT.sum()), P * G
        has_signal = bool(d.sum((adv_B != 0).sum()) > 0) or ref is not None
        t2 = time.time()
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        for _ in range(cfg.ppo_epochs):
            logits_BTV = forward_logits(ddp_model, *args)
            logp_BT = token_logprobs(logits_BTV, roll.completion_ids_BT, cfg.temperature)
            old = old_logp_BT if old_logp_BT is not None else logp_BT.detach()
            loss, pm = losses.policy_loss(logp_BT, old, adv_BT, mask_BT, clip_low=clip_low, clip_high=clip_high,
                                          aggregation=cfg.aggregation, num_tokens=n_tok, num_seqs=n_seq)
            kl_mean = torch.tensor(0.0)
            if ref_logp_BT is not None:
                kl_loss, kl_mean = losses.kl_penalty(logp_BT, ref_logp_BT, mask_BT, cfg.kl_coef, cfg.aggregation,
                                                     n_tok, n_seq, clamp=cfg.kl_clamp)
                loss = loss + kl_loss
            gnorm = kit.optimizer_step(loss, model, opt, d, cfg.grad_clip, skip=not has_signal)
        t_update = time.time() - t2
        with torch.no_grad():
            ent = losses.masked_mean(losses.entropy_from_logits(logits_BTV.detach()), mask_BT)
        stats = {"reward": float(d.sum(rewards_B.sum()) / n_seq), **rollout_stats(roll)}
        row = {"step": step, "loss": float(loss.detach()), **stats, "entropy": float(ent), "kl": float(kl_mean),
               "clip_frac": float(pm["clip_frac"]), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "frac_groups_with_signal": float((rewards_B.view(-1, G).std(-1) > 0).float().mean()),
               "time/sample": t_sample, "time/score": t_score, "time/update": t_update, "step_time": time.time() - t0}
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn, reward=f"{row['reward']:.2f}")
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt)
    summary = {"out": str(run.final), "steps": cfg.steps, "train_seconds": time.time() - st.t_start,
               "final_reward": row.get("reward")}
    return kit.close_run(st, model, tok, summary, row)
