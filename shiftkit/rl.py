"""GRPO with verifiable rewards: one readable loop.

Per step: draw ``prompts_per_step`` training problems from ``(seed, step)``; sample
``group_size`` completions each (KV-cache sampler, per-row seeds); reward each with the task's
exact checker; group-relative advantages; then ``ppo_epochs`` passes of the shared policy loss
(:func:`shiftkit.losses.policy_loss`) with optional PPO clipping and an optional k3 KL to the
reference policy (the starting model). Under ``accelerate launch`` each rank takes a strided share
of the prompt groups and losses are normalised by global token/sequence counts, so N processes give
the single-process update.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from pathlib import Path

import torch

from shiftkit import losses
from shiftkit.config import to_dict
from shiftkit.dist import Dist, unwrap
from shiftkit.errors import ShiftkitError
from shiftkit.runs import RunDir
from shiftkit.sampling import Rollouts, forward_logits, sample, score, token_logprobs
from shiftkit.train_common import grad_norm_clip, lr_at, make_optimizer, set_lr, set_threads


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


def row_seed(seed: int, step: int, prompt_idx: int, sample_idx: int) -> int:
    """The sampling seed of one rollout; independent of how rows are batched or sharded."""
    return (seed * 1_000_003 + step * 10_007 + prompt_idx * 101 + sample_idx) % (2**62)


def draw_problems(mixture, seed: int, step: int, n: int):
    rng = random.Random(f"rl:{seed}:{step}")
    return [mixture.sample(rng, "train") for _ in range(n)]


def rollout_stats(roll: Rollouts) -> dict:
    m = roll.completion_mask_BT.float()
    return {"response_len": float(m.sum(-1).mean()), "eos_rate": float(roll.eos_B.float().mean())}


def run_grpo(cfg: GRPOConfig) -> dict:
    from shiftkit.evaluate import evaluate_model
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import Mixture, eval_set

    set_threads(cfg.threads)
    d = Dist()
    mixture = Mixture(cfg.tasks)
    run = RunDir(cfg.out, to_dict(cfg), overwrite=cfg.overwrite)
    if run.done:
        return run.summary()
    model, tok = load_model_and_tokenizer(cfg.model, device=d.device)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    model.train()
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    start = 0
    if (ck := run.latest_checkpoint()) is not None:
        start, _ = run.load_trainer_state(ck, model, opt)
    ddp_model = d.wrap(model)
    log = run.metrics_writer(start) if d.is_main else None
    evals = eval_set(cfg.tasks, cfg.eval_n) if cfg.eval_every else []
    clip_low = cfg.clip_low or None
    clip_high = (cfg.clip_high or cfg.clip_low) or None
    P, G = cfg.prompts_per_step, cfg.group_size
    bar = None
    if cfg.progress and d.is_main:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=start, desc=f"grpo {Path(cfg.out).name}", leave=False)

    def do_eval(step: int) -> dict:
        ev = evaluate_model(model, tok, evals, mixture.reward, max_new_tokens=cfg.max_new_tokens)
        return {"step": step, **{f"eval/{k}": v for k, v in ev.items() if k != "per_problem"}}

    first_eval = None
    if evals and start == 0 and d.is_main:
        first_eval = do_eval(0)
        log.write(first_eval)
    t_train = time.time()
    row: dict = {}
    for step in range(start, cfg.steps):
        t0 = time.time()
        problems = draw_problems(mixture, cfg.seed, step, P)
        mine = d.shard(list(range(P)))
        prompts = [problems[i].prompt for i in mine for _ in range(G)]
        seeds = [row_seed(cfg.seed, step, i, j) for i in mine for j in range(G)]
        roll = sample(model, tok, prompts, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                      top_p=cfg.top_p, row_seeds=seeds)
        t_sample = time.time() - t0
        rewards_B = torch.tensor([mixture.reward(problems[i], roll.texts[k * G + j])
                                  for k, i in enumerate(mine) for j in range(G)])
        adv_B = losses.group_advantages(rewards_B, G, cfg.adv_scale)
        mask_BT = roll.completion_mask_BT
        adv_BT = adv_B[:, None].expand_as(mask_BT).to(d.device)
        args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, mask_BT)
        t1 = time.time()
        off_policy = clip_low is not None or cfg.ppo_epochs > 1 or cfg.top_p < 1.0
        old_logp_BT = score(model, *args, temperature=cfg.temperature) if off_policy else None
        ref_logp_BT = score(ref, *args, temperature=cfg.temperature) if ref is not None else None
        t_score = time.time() - t1
        n_tok, n_seq = d.sum(mask_BT.sum()), P * G
        has_signal = bool(d.sum((adv_B != 0).sum()) > 0) or ref is not None
        t2 = time.time()
        set_lr(opt, lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
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
            opt.zero_grad(set_to_none=True)
            (loss * d.world).backward()
            gnorm = grad_norm_clip(model, cfg.grad_clip)
            if has_signal:  # an all-zero-advantage batch carries no information: don't let Adam's
                opt.step()  # momentum move the policy on it (it would, with zero gradients)
        t_update = time.time() - t2
        with torch.no_grad():
            ent = losses.masked_mean(losses.entropy_from_logits(logits_BTV.detach()), mask_BT)
        stats = {"reward": float(d.sum(rewards_B.sum()) / n_seq), **rollout_stats(roll)}
        row = {"step": step, "loss": float(loss.detach()), **stats, "entropy": float(ent), "kl": float(kl_mean),
               "clip_frac": float(pm["clip_frac"]), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "frac_groups_with_signal": float((rewards_B.view(-1, G).std(-1) > 0).float().mean()),
               "time/sample": t_sample, "time/score": t_score, "time/update": t_update, "step_time": time.time() - t0}
        done = step + 1 == cfg.steps
        if evals and d.is_main and ((step + 1) % cfg.eval_every == 0 or done):
            row.update({k: v for k, v in do_eval(step + 1).items() if k != "step"})
        if log:
            log.write(row)
        if bar:
            bar.update(1)
            bar.set_postfix(reward=f"{row['reward']:.2f}")
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and not done:
            if d.is_main:
                run.save_checkpoint(step + 1, model, tok, opt)
            d.barrier()
    if bar:
        bar.close()
    summary = {"out": str(run.final), "steps": cfg.steps, "train_seconds": time.time() - t_train,
               "final_reward": row.get("reward")}
    if first_eval:
        summary["initial_greedy_acc"] = first_eval.get("eval/greedy_acc")
    if "eval/greedy_acc" in row:
        summary["final_greedy_acc"] = row["eval/greedy_acc"]
    if d.is_main:
        log.close()
        run.finish(unwrap(ddp_model), tok, summary)
    d.barrier()
    return summary
