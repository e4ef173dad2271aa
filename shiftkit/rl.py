"""GRPO with verifiable rewards: one readable loop.

Per step: draw ``prompts_per_step`` training problems from ``(seed, step)``; sample
``group_size`` completions each (KV-cache sampler, per-row seeds); reward each with the task's
exact checker; group-relative advantages (:func:`shiftkit.advantages.group_advantages`); with
``dynamic_sampling`` (DAPO), refill rounds of fresh prompts replace the groups without signal; then
``ppo_epochs`` passes of the shared policy loss (:func:`shiftkit.losses.policy_loss`) with optional
PPO clipping and an optional k3 KL to the reference policy (the starting model). Rows that carry no
gradient (advantage 0 and no KL) get no forward or backward, and a step where no row does skips the
update entirely; ``packing`` runs the update padding-free (:mod:`shiftkit.microbatch`). The run directory,
resume, logging and checkpoints are the training kit's (:mod:`shiftkit.loopkit`). Under ``accelerate launch`` each rank takes a strided share
of the prompt groups and losses are normalised by global token/sequence counts, so N processes give
the single-process update.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from pathlib import Path

import torch

from shiftkit import advantages, logprobs, losses, microbatch
from shiftkit import loopkit as kit
from shiftkit.config import check_dependent
from shiftkit.data import DataKeys, HeldOutKeys
from shiftkit.dist import Dist, DistKeys, set_threads
from shiftkit.errors import ShiftkitError
from shiftkit.evaluate import held_out_eval
from shiftkit.inputs import prompt_inputs
from shiftkit.models import frozen_copy, load_policy, prepare_policy
from shiftkit.microbatch import MemoryConfig
from shiftkit.prompts import CHAT_TEMPLATE_RULES, PromptKeys
from shiftkit.rewards import KernelEnvKeys, RewardKeys, kernel_env_rules, reads_kernel_env
from shiftkit.remote import RolloutSync, logprob_gap, served_rollouts
from shiftkit.runs import KEEP_CHECKPOINTS
from shiftkit.sampling import Rollouts, concat_rollouts


@dataclasses.dataclass
class GRPOConfig(MemoryConfig, DataKeys, HeldOutKeys, PromptKeys, RewardKeys, KernelEnvKeys, DistKeys):
    """``shiftkit rl``: the GRPO keys below, plus the shared groups: memory (:class:`MemoryConfig`), data
    (:class:`DataKeys`, :class:`HeldOutKeys`), prompts (:class:`PromptKeys`), rewards (:class:`RewardKeys`) and
    the kernel environment of ``reward=kernel`` (:class:`KernelEnvKeys`)."""

    model: str = ""  # HF model dir or cached hub id (the policy's start and the KL reference)
    out: str = "runs/rl"  # run directory (config.json, metrics.jsonl, samples.jsonl, checkpoints/, final/)
    # -- GRPO --
    steps: int = 200  # optimizer steps
    prompts_per_step: int = 16  # prompts per step (each sampled group_size times)
    group_size: int = 8  # completions per prompt (the GRPO group)
    max_new_tokens: int = 1024  # completion length limit
    temperature: float = 1.0  # sampling temperature (log-probs are scored at it too)
    top_p: float = 1.0  # nucleus sampling
    lr: float = 1e-6  # peak learning rate (AdamW)
    warmup: int = 0  # linear warm-up steps
    schedule: str = "constant"  # constant | cosine | linear (after warm-up)
    weight_decay: float = 0.0  # AdamW weight decay on matrices
    grad_clip: float = 1.0  # gradient-norm clip (0 = off)
    aggregation: str = "token_mean"  # token_mean | seq_mean
    adv_scale: str = "std"  # std (GRPO) | none (Dr. GRPO)
    clip_low: float = 0.0  # PPO clip; 0 = no lower clip (and clip_high 0 too: no clipping, REINFORCE surrogate)
    clip_high: float = 0.0  # 0 = same as clip_low
    clip_dual: float = 0.0  # dual-clip PPO (verl's clip_ratio_c, e.g. 3): a token with advantage A < 0 loses at most -clip_dual * A, and the log-ratio is clamped to +-20 as verl does; 0 = off
    dynamic_sampling: int = 0  # DAPO dynamic sampling: at most this many extra rounds of prompts_per_step prompts per step, whose groups with signal replace the groups without (all rewards equal); 0 = off
    ppo_epochs: int = 1  # passes over each batch
    kl_coef: float = 0.0  # k3 KL to the reference (the starting model); 0 = no reference model
    kl_clamp: bool = True  # clamp the k3 log-ratio to [-20, 20] and the k3 to 10, as verl's low_var_kl
    seed: int = 0  # every draw is a function of (seed, step)
    eval_every: int = 20  # greedy eval on the held-out rows every N steps (arith data or eval_split; 0 = off)
    eval_n: int = 100  # arith data: held-out problems per domain
    save_every: int = 50  # resumable checkpoint every N steps (0 = only the final model)
    keep_checkpoints: int = KEEP_CHECKPOINTS  # checkpoints kept, also after the run finishes: the last N (0 = none, -1 = all)
    samples_every: int = 10  # write the first samples_n rollouts to samples.jsonl every N steps (0 = off)
    samples_n: int = 4  # rollouts per samples.jsonl dump
    report_to: str = "none"  # none | tensorboard | wandb (through accelerate's trackers)
    rollout_url: str = ""  # sample on this completions server (shiftkit serve, vLLM, SGLang), synced after every step ("" = in process)
    rollout_sync: RolloutSync = "sglang"  # weight-sync route of that server: sglang (POST /update_weights_from_disk) | vllm (dev-mode /collective_rpc reload_weights)
    threads: int = 0  # torch threads (0 = torch's default)
    overwrite: bool = False  # replace an existing out directory
    progress: bool = True  # progress bar (periodic log lines when stderr is not a terminal)

    def validate(self) -> None:
        if not self.model:
            raise ShiftkitError("rl needs model=<path or hub id>")
        if self.steps <= 0 or self.prompts_per_step <= 0 or self.group_size < 2:
            raise ShiftkitError("rl: steps and prompts_per_step must be positive and group_size >= 2")
        if self.aggregation not in losses.AGGREGATIONS:
            raise ShiftkitError(f"rl: aggregation must be token_mean or seq_mean, got '{self.aggregation}'")
        if self.adv_scale not in ("std", "none"):
            raise ShiftkitError(f"rl: adv_scale must be std or none, got '{self.adv_scale}'")
        if self.dynamic_sampling < 0:
            raise ShiftkitError(f"rl: dynamic_sampling must be >= 0 (extra sampling rounds; 0 = off), got {self.dynamic_sampling}")
        losses.ppo_clip(self.clip_low, self.clip_high, self.clip_dual)  # the ranges (0 = off)
        self.check_data("rl")
        self.check_kernel_keys("rl")
        check_dependent(self, {**GRPO_DEPENDENT, **KERNEL_RULES}, "rl")
        self.validate_memory("rl")
        kit.check_report_to(self.report_to)


# keys read only when another key is set (shiftkit.config.check_dependent)
GRPO_DEPENDENT = {**CHAT_TEMPLATE_RULES, **kit.SAMPLES_RULES, **kit.CHECKPOINT_RULES,
                  "kl_clamp": (lambda c: c.kl_coef > 0, "with a KL (kl_coef > 0)"),
                  "frozen_placement": (lambda c: c.kl_coef > 0, "with a KL reference (kl_coef > 0)"),
                  "rollout_sync": (lambda c: bool(c.rollout_url), "with served rollouts (rollout_url)")}
KERNEL_RULES = kernel_env_rules(lambda c: reads_kernel_env(c.reward), lambda c: "kernel" in c.reward,
                                "with reward=kernel (or a reward function by import path)", "with reward=kernel")


def rollout_stats(roll: Rollouts, train_logp_BT: torch.Tensor, trained_B: torch.Tensor) -> dict:
    """Length and EOS rate of this rank's rollouts, and the sampler - trainer log-prob gap on the tokens
    of the rows the update ran on (``trained_B``; none: no gap)."""
    m = roll.completion_mask_BT.float()
    out = {"response_len": float(m.sum(-1).mean()), "eos_rate": float(roll.eos_B.float().mean())}
    if bool(trained_B.any()):
        gap = logprob_gap(roll.logp_BT, train_logp_BT, roll.completion_mask_BT * trained_B[:, None].to(m.device))
        out.update({"rollout/logprob_gap": gap["mean_abs"], "rollout/logprob_gap_max_abs": gap["max_abs"],
                    "rollout/logprob_gap_mean_signed": gap["mean_signed"]})
    return out


def run_grpo(cfg: GRPOConfig) -> dict:
    set_threads(cfg.threads)
    d = Dist(cfg)  # the launcher's strategy and settings (mixed precision -> autocast), before config.json
    client = served_rollouts(cfg.rollout_url, cfg.rollout_sync)  # an unreachable server fails before anything loads
    model, tok = load_policy(cfg.model, d.device)
    inp = prompt_inputs(cfg, tok, "rl", eval_n=cfg.eval_n, model_path=cfg.model, want_eval=cfg.eval_every > 0)
    d, run = kit.open_run(cfg, d)  # nothing is written before the model, data and reward load and validate
    if run.done:
        return run.summary()
    model = prepare_policy(model, cfg)  # LoRA adapters, activation checkpointing
    ref = d.place_frozen(frozen_copy(model, cfg)) if cfg.kl_coef > 0 else None  # FSDP: sharded (frozen_placement)
    model.train()
    ddp_model = d.wrap(model)  # DDP wrapper, or FSDP2: `model` sharded in place (before the optimizer)
    opt = kit.make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = kit.resume(run, model, opt, d, cfg.steps, f"grpo {Path(cfg.out).name}", cfg.progress, cfg.report_to)
    eval_fn = held_out_eval(model, tok, inp, cfg.max_new_tokens) if cfg.eval_every else None
    kit.first_eval(st, eval_fn)
    if client is not None:  # the server samples from the run's policy (the start, or the resumed checkpoint)
        client.sync_weights(model, tok, run.path / "rollout_weights", d)
    sample_fn = client.rollout if client is not None else lambda *a, **k: kit.rollout(model, *a, **k)
    row: dict = {}
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        b = grpo_batch(cfg, inp, tok, sample_fn, step, d)
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        u = grpo_update(cfg, model, ddp_model, ref, opt, b, d)
        if client is not None:  # the next step samples from the updated policy
            client.sync_weights(model, tok, run.path / "rollout_weights", d)
        row = {"loss": u.pop("loss"), **b.metrics,
               **rollout_stats(b.roll, u.pop("train_logp_BT"), u.pop("trained_B")), **u,
               "lr": opt.param_groups[0]["lr"], "time/sample": b.t_sample, "step_time": time.time() - t0}
        kit.write_samples(st, step, cfg.samples_every, lambda: kit.samples_rows(
            step, b.examples, b.roll.texts, b.rewards, b.adv_B.tolist(), cfg.samples_n, b.extra))
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn, reward=f"{row['reward']:.2f}")
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt)
    summary = {"out": str(run.final), "steps": cfg.steps, "train_seconds": time.time() - st.t_start,
               "final_reward": row.get("reward")}
    return kit.close_run(st, model, tok, summary, row)


@dataclasses.dataclass
class GroupBatch:
    """One step's training batch on this rank: whole groups (row ``k * G + j`` is sample ``j`` of group ``k``)."""

    roll: Rollouts
    examples: list  # each row's problem
    rewards: dict[str, list[float]]  # "total" (NaN: unscorable) and, with several rewards, each one's values
    adv_B: torch.Tensor  # group advantages (0 on unscorable rows and in groups without signal)
    metrics: dict  # the first round's reward metrics and signal; dynamic sampling's counts
    t_sample: float  # seconds spent sampling
    extra: dict[str, list]  # the columns rewards added with log_extra (e.g. reward=kernel's findings), per row


def grpo_batch(cfg: GRPOConfig, inp, tok, sample_fn, step: int, d: Dist) -> GroupBatch:
    """Sample and reward this step's groups; group advantages.

    ``dynamic_sampling = R`` (DAPO's dynamic sampling, with a budget: verl's ``filter_groups`` with
    ``max_num_gen_batches = R + 1``): while some rank's batch has groups without signal (all rewards
    equal, so advantage 0), up to ``R`` refill rounds each draw ``prompts_per_step`` fresh prompts and
    sample them (round ``r`` of step ``s`` is batch ``steps + s * R + r - 1`` of the same seeded
    stream, never one of the run's own steps); each rank keeps as many groups as its first round had:
    its groups with signal in draw order, then, if the budget ran out, its first round's groups without
    signal. ``R = 0`` is the plain step. The logged ``reward`` and ``frac_groups_with_signal`` are the
    first round's (the policy's own rate, comparable across settings).
    """
    P, G = cfg.prompts_per_step, cfg.group_size
    parts, t_sample = [], 0.0
    for r in itertools.count():
        draw = step if r == 0 else cfg.steps + step * cfg.dynamic_sampling + r - 1
        problems = inp.ds.draw(cfg.seed, draw, P)
        t = time.time()
        mine, roll = sample_fn(tok, inp.prompts_for(problems), G, cfg.seed, draw, d, rows=cfg.rollout_rows,
                               max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
        t_sample += time.time() - t
        ex_B = [problems[i] for i in mine for _ in range(G)]
        res = inp.rewards.score(ex_B, roll.texts, step=step, completion_ids=[
            x[m.bool()].tolist() for x, m in zip(roll.completion_ids_BT, roll.completion_mask_BT)])
        adv_B = advantages.group_advantages(torch.tensor(res.total), G, cfg.adv_scale)  # NaN (unscorable): 0
        parts.append((roll, ex_B, {"total": res.total, **({} if len(res.per_reward) == 1 else res.per_reward)},
                      adv_B, (adv_B.view(-1, G) != 0).any(-1), res.extra))
        missing = len(mine) - sum(int(p[4].sum()) for p in parts)
        if r == 0:
            total0, res0 = torch.tensor(res.total).nan_to_num(0.0), res
        if r == cfg.dynamic_sampling or float(d.sum(max(missing, 0))) == 0:
            break
    metrics = {"reward": float(d.sum(total0.sum()) / (P * G)),
               **{k: v for k, v in res0.metrics.items() if k.startswith("rewards/")},
               "frac_groups_with_signal": float(parts[0][4].float().mean()) if len(parts[0][4]) else 0.0}
    if cfg.dynamic_sampling == 0:
        roll, ex_B, rewards, adv_B, _, extra = parts[0]
        return GroupBatch(roll, ex_B, rewards, adv_B, metrics, t_sample, extra)
    n_groups = len(parts[0][4])
    picks = [(r, k) for r, p in enumerate(parts) for k in range(len(p[4])) if p[4][k]]
    picks = (picks + [(0, k) for k in range(n_groups) if not parts[0][4][k]])[:n_groups]
    first = [0]
    for p in parts[:-1]:
        first.append(first[-1] + len(p[1]))
    rows = [first[r] + k * G + j for r, k in sorted(picks) for j in range(G)]
    examples = [ex for p in parts for ex in p[1]]
    rewards = {k: [v for p in parts for v in p[2][k]] for k in parts[0][2]}
    extra = {k: [v for p in parts for v in p[5].get(k, [None] * len(p[1]))] for k in {k for p in parts for k in p[5]}}
    adv_B = torch.cat([p[3] for p in parts])[rows]
    metrics.update({"dynamic/rounds": len(parts), "dynamic/frac_groups_with_signal":
                    float((adv_B.view(-1, G) != 0).any(-1).float().mean()) if n_groups else 0.0})
    roll = concat_rollouts([p[0] for p in parts], tok.pad_token_id) if len(parts) > 1 else parts[0][0]
    return GroupBatch(take_rows(roll, rows), [examples[i] for i in rows], {k: [v[i] for i in rows]
                      for k, v in rewards.items()}, adv_B, metrics, t_sample,
                      {k: [v[i] for i in rows] for k, v in sorted(extra.items())})


def take_rows(roll: Rollouts, rows: list[int]) -> Rollouts:
    """The rollouts of ``rows`` (every tensor field indexed, every list field picked)."""
    def pick(v):
        if torch.is_tensor(v):
            return v[torch.tensor(rows, dtype=torch.long, device=v.device)]
        return [v[i] for i in rows] if isinstance(v, list) else v

    return dataclasses.replace(roll, **{f.name: pick(getattr(roll, f.name)) for f in dataclasses.fields(roll)})


def grpo_update(cfg: GRPOConfig, model, ddp_model, ref, opt, b: GroupBatch, d: Dist) -> dict:
    """``ppo_epochs`` passes of the policy loss (+ the k3 KL) over the micro-batches, then the clipped step.

    A row with advantage 0 everywhere and no KL term adds exactly 0 to the gradient, so it gets no
    forward or backward (``micro_batches(keep_B=...)``); the losses keep the whole batch's global counts,
    so the update is the one over every row (bit for bit when each row is its own micro-batch, to float
    rounding otherwise). No row left (a step without signal): no forward, no backward, no optimizer step.
    Returns the step's metrics, the trainer's log-probs ``train_logp_BT`` of the sampled tokens before
    the update, and ``trained_B`` (the rows the update ran on, this rank).
    """
    roll, G = b.roll, cfg.group_size
    mask_BT = roll.completion_mask_BT
    dtype, chunk = microbatch.autocast_dtype(cfg.autocast), cfg.logit_chunk or None
    trained_B = microbatch.rows_with_gradient(b.adv_B, other_terms=ref is not None)
    adv_BT = b.adv_B[:, None].expand_as(mask_BT).to(d.device)
    args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, mask_BT)
    mbs = microbatch.micro_batches(roll.prompt_mask_BP, mask_BT, cfg.token_budget, d=d, keep_B=trained_B,
                                   packed=cfg.packing)  # memory: one micro-batch at a time
    clip = losses.ppo_clip(cfg.clip_low, cfg.clip_high, cfg.clip_dual)
    off_policy = kit.needs_old_logprobs(cfg.clip_low, cfg.clip_high, cfg.ppo_epochs, cfg.top_p)
    t1 = time.time()
    old_logp_BT = (logprobs.score_mb(model, *args, mbs, dtype=dtype, temperature=cfg.temperature, chunk=chunk)
                   if off_policy and mbs else None)
    ref_logp_BT = (logprobs.score_mb(ref, *args, mbs, dtype=dtype, temperature=cfg.temperature, chunk=chunk)
                   if ref is not None else None)
    d.release(ref)  # FSDP: the frozen reference's gathered shards
    t_score, t2 = time.time() - t1, time.time()
    n_tok, n_seq = d.sum(mask_BT.sum()), cfg.prompts_per_step * G
    train_logp_BT = torch.zeros_like(roll.logp_BT)  # the trainer's log-probs of the sampled tokens, before the update
    for epoch in range(cfg.ppo_epochs):
        opt.zero_grad(set_to_none=True)
        loss_sum, clip_sum, dual_sum, ent_sum, kl_sum = torch.zeros(()), 0.0, 0.0, 0.0, 0.0
        for mb in microbatch.accumulating(ddp_model, mbs):  # no_sync until the last micro-batch
            m_bt, ids_bt = mb.completion(mask_BT), mb.completion(roll.completion_ids_BT)
            head = logprobs.model_head(ddp_model, mb.prompt(roll.prompt_ids_BP), mb.prompt(roll.prompt_mask_BP),
                                       ids_bt, m_bt, dtype=dtype, temperature=cfg.temperature, packed=mb.packed)
            logp_bt, ent_bt = logprobs.token_logprobs_entropy(head, ids_bt, chunk)
            old = mb.completion(old_logp_BT) if old_logp_BT is not None else logp_bt.detach()
            loss, pm = losses.policy_loss(logp_bt, old, mb.completion(adv_BT), m_bt, **clip,
                                          aggregation=cfg.aggregation, num_tokens=n_tok, num_seqs=n_seq)
            n = float(m_bt.sum()) * mb.scale
            if ref_logp_BT is not None:
                kl_loss, kl_mean = losses.kl_penalty(logp_bt, mb.completion(ref_logp_BT), m_bt, cfg.kl_coef,
                                                     cfg.aggregation, n_tok, n_seq, clamp=cfg.kl_clamp)
                loss = loss + kl_loss
                kl_sum += float(kl_mean) * n
            loss = loss * mb.scale  # 0 for a filler micro-batch that only keeps ranks in step
            (loss * d.world).backward()  # the loss is a global-count mean: summed over micro-batches and ranks
            loss_sum = loss_sum + loss.detach().float().cpu()
            clip_sum += float(pm["clip_frac"]) * n
            dual_sum += float(pm["dual_clip_frac"]) * n
            ent_sum += float((ent_bt.detach() * m_bt).sum()) * mb.scale
            if epoch == 0 and mb.scale:
                mb.put(train_logp_BT, logp_bt.detach())
        gnorm = kit.clip_and_step(model, opt, cfg.grad_clip, skip=not mbs)
    n_mine = max(float(mask_BT.sum()), 1.0)
    n_trained = float((mask_BT * trained_B[:, None].to(mask_BT.device)).sum())
    out = {"loss": float(loss_sum), "train_logp_BT": train_logp_BT, "trained_B": trained_B,
           "kl": kl_sum / n_mine, "clip_frac": clip_sum / n_mine, "grad_norm": gnorm, "micro_batches": len(mbs),
           "update_rows": int(trained_B.sum()), "time/score": t_score, "time/update": time.time() - t2}
    if n_trained:  # the entropy of the rows the update ran on
        out["entropy"] = ent_sum / n_trained
    if cfg.clip_dual:
        out["dual_clip_frac"] = dual_sum / n_mine
    return out
