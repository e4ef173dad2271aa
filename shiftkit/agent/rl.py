"""Agentic RL on multi-turn tool use: behaviour cloning / rejection fine-tuning with assistant-only
losses, value pretraining, and GRPO or PPO (value head, GAE gamma=1 lambda=0.95, asymmetric clip
0.2/0.28) with token masks that train only model-generated tokens.

Data layout (one row per episode): ``ids = [prompt | turn 1 <eos> | tool output | turn 2 <eos> ...]``;
``gen`` marks the tokens the model generated (assistant turns incl. their EOS). The prompt is
left-padded and the rest right-padded (the foundation's layout, :mod:`shiftkit.agent.batches`), so the
chunked head (:func:`shiftkit.logprobs.model_head`) scores it; tool-output tokens are attended to but carry no loss, no advantage and no value target.

The loop (:func:`run_agentic_rl`) on the toy calculator task (:mod:`shiftkit.agent.toytask`):

1. warm start: behaviour cloning on noisy demonstrations (:func:`warm_start`, cached in ``<out>/../warm``);
2. PPO only: value pretraining of the critic on rollouts of the frozen policy (:func:`value_pretrain`),
   with the critic error measured on held-out rollouts before and after;
3. per step: rollouts (``prompts_per_step`` x ``group_size``) through the shared sampler
   (:func:`shiftkit.sampling.sample` on token contexts, one turn at a time; with ``rollout_url``, the
   same calls to a served model, :class:`shiftkit.remote.RolloutClient`, whose weights are synced from the
   policy after every step and whose log-prob gap to the trainer is logged), trajectory rewards,
   advantages (GRPO: group-relative, broadcast over generated tokens; PPO: GAE over generated tokens
   from the critic; :mod:`shiftkit.advantages`), ``ppo_epochs`` updates of
   :func:`shiftkit.losses.policy_loss` (+ the clipped value loss); an all-zero-advantage batch does
   not step the optimizer.

The bookkeeping is the training kit's (:mod:`shiftkit.loopkit`): a run directory with
``config.json``, ``metrics.jsonl``, resumable checkpoints (policy, optimizer, and the critic with its
optimizer in the checkpoint's extra state), ``final/`` and ``DONE``; a killed run resumes bit for bit.

:func:`kernel_rl_step` runs the same update once on kernel-agent trajectories (chat format, mechanics).
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from pathlib import Path

import torch

from shiftkit import advantages, logprobs, losses, microbatch
from shiftkit import loopkit as kit
from shiftkit.agent import toytask
from shiftkit.agent.batches import chat_examples, collate, masked_sft_step, micro, policy_logp
from shiftkit.agent.critic import ValueModel, critic_error, returns_mc
from shiftkit.agent.episode import AgentToolKeys
from shiftkit.agent.trajectory import end_of, messages_of
from shiftkit.agent.turns import multi_turn
from shiftkit.config import check_dependent
from shiftkit.dist import full_state_dict, load_full_state_dict, load_optimizer_state, optimizer_state
from shiftkit.errors import ShiftkitError
from shiftkit.io import read_jsonl
from shiftkit.models import WEAK_SPEC, load_model_and_tokenizer, make_char_tokenizer, make_tiny_model, prepare_policy
from shiftkit.models import save_model
from shiftkit.remote import RolloutSync, logprob_gap, served_rollouts
from shiftkit.rewards import KernelEnvKeys, kernel_env_rules
from shiftkit.rl import GRPOConfig
from shiftkit.runs import KEEP_CHECKPOINTS
from shiftkit.sampling import sample

# ----------------------------------------------------------------------------- toy rollouts


def toy_rollouts(model, tok, problems: list[toytask.ToyProblem], max_turns: int, max_new: int, temperature: float,
                 seeds: list[int] | None, sampler=None,
                 logps: list | None = None) -> tuple[list[toytask.ToyEpisode], list[tuple[list[int], list[int]]]]:
    """Multi-turn episodes, batched across episodes turn by turn through :func:`shiftkit.sampling.sample`
    (greedy when ``seeds`` is None; turn ``t`` of episode ``i`` draws from ``row_seed(seeds[i], t, 0, 0)``).
    Returns the episodes and their ``(ids, gen)`` rows. ``sampler`` replaces the in-process sampler with
    one of the same call (:meth:`shiftkit.remote.RolloutClient.sample`: a served model); ``logps``, a
    list, receives each row's per-token sampling log-probs (0 on prompt and tool tokens)."""
    eps = [toytask.ToyEpisode(p) for p in problems]
    prompts = [tok(p.prompt, add_special_tokens=False)["input_ids"] for p in problems]
    rows = multi_turn(model, tok, prompts, lambda idx, texts, turn: [toytask.step(eps[i], t) for i, t in zip(idx, texts)],
                      max_turns=max_turns, max_new=max_new, temperature=temperature, seeds=seeds, sampler=sampler,
                      logps=logps)
    return eps, rows


def demo_rows(tok, rng: random.Random, n: int, p_correct: float) -> list[tuple[list[int], list[int]]]:
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    rows = []
    for _ in range(n):
        p = toytask.draw_problem(rng)
        ids, gen = enc(p.prompt), [0] * len(enc(p.prompt))
        ep = toytask.ToyEpisode(p)
        for turn in toytask.demo_trajectory(rng, p, p_correct):
            t = enc(turn) + [tok.eos_token_id]
            ids += t
            gen += [1] * len(t)
            obs = toytask.step(ep, turn)
            if obs is not None:
                ids += enc(obs)
                gen += [0] * len(enc(obs))
        rows.append((ids, gen))
    return rows


# ----------------------------------------------------------------------------- config + loop


@dataclasses.dataclass
class AgenticRLConfig(microbatch.MemoryConfig, AgentToolKeys, KernelEnvKeys):
    """``shiftkit agent train``: the loop's keys below, the memory keys, and for ``task=kernels`` the agent's
    tool keys (:class:`~shiftkit.agent.episode.AgentToolKeys`) and the kernel environment
    (:class:`~shiftkit.rewards.KernelEnvKeys`: ``kernel_mode`` is the final evaluation's mode,
    ``kernel_config`` the EvalConfig overrides of every request)."""

    task: str = "toy"  # toy (the calculator tool task) | kernels (kernel problems, tools through the kernel environment)
    out: str = "runs/agent/toy_rl"
    algo: str = "ppo"  # ppo (critic + GAE) | grpo (group-relative, no critic)
    seed: int = 0
    steps: int = 30
    prompts_per_step: int = 8
    group_size: int = 8
    max_turns: int = 3
    max_new_tokens: int = 14
    temperature: float = 1.0
    lr: float = 3e-4  # 1e-3 collapsed PPO on seed 1 (reward 0.36 -> 0.03 by step 20); 3e-4 is stable
    critic_lr: float = 2e-3
    ppo_epochs: int = 2
    clip_low: float = 0.2  # PPO clip below (0 = off: no lower clip), the same rule as shiftkit rl (losses.ppo_clip)
    clip_high: float = 0.28  # PPO clip above (0 = same as clip_low; both 0: no clipping)
    clip_dual: float = GRPOConfig.clip_dual  # dual-clip PPO on negative advantages (verl's clip_ratio_c, e.g. 3); 0 = off
    gamma: float = 1.0
    lam: float = 0.95
    value_clip: float = 0.2
    whiten_advantages: bool = True
    whiten_unbiased: bool = False  # whiten with the Bessel-corrected variance (verl's masked_whiten); default the biased one
    value_pretrain_steps: int = 30
    value_pretrain_batches: int = 4  # distinct rollout batches the critic is pretrained on (cycled)
    grad_clip: float = 1.0
    eval_every: int = 10
    eval_n: int = 64  # held-out problems, greedy
    warm_dir: str = ""  # "" = <out>/../warm (shared by seeds)
    warm_steps: int = 400
    warm_batch: int = 32
    warm_lr: float = 3e-3
    warm_p_correct: float = 0.4
    save_every: int = 0  # resumable checkpoint every N steps (policy, critic, both optimizers)
    keep_checkpoints: int = KEEP_CHECKPOINTS  # checkpoints kept, also after the run finishes: the last N (0 = none, -1 = all)
    rollout_url: str = ""  # training rollouts from this completions server (shiftkit serve, vLLM, SGLang), synced every step ("" = in process)
    rollout_sync: RolloutSync = "sglang"  # weight-sync route of that server: sglang | vllm (see shiftkit.remote)
    samples_every: int = 10  # write the first samples_n episodes to samples.jsonl every N steps (0 = off)
    samples_n: int = 4
    threads: int = 1
    overwrite: bool = False
    progress: bool = False
    # -- task=kernels --
    model: str = ""  # the policy's start (HF model dir); task=toy builds and warm-starts its own
    data: str = ""  # kernel problem rows: JSONL with problem + problem_name (`shiftkit kernels dataset`), synth output or a problem dir
    eval_data: str = ""  # held-out problem rows (eval_n episodes, cycled over them)
    actions: str = "tools"  # tools (text tool calls on the agent's tools, chat template) | grammar (kernel-grammar compositions)
    obs_max_tokens: int = 512  # budget of one tool output in tokens (cut beyond it; counted as obs_truncated)

    def validate(self) -> None:
        if self.task not in ("toy", "kernels"):
            raise ShiftkitError(f"agent train: task must be toy or kernels, got {self.task!r}")
        self.validate_task()
        if self.algo not in ("ppo", "grpo"):
            raise ShiftkitError(f"agentic rl: algo must be ppo or grpo, got {self.algo!r}")
        if self.group_size < 2 and self.algo == "grpo":
            raise ShiftkitError("agentic rl: grpo needs group_size >= 2")
        self.validate_memory("agentic rl")
        check_dependent(self, kit.CHECKPOINT_RULES, "agentic rl")
        losses.ppo_clip(self.clip_low, self.clip_high, self.clip_dual)  # the ranges (0 = off)
        if self.whiten_unbiased and (self.algo != "ppo" or not self.whiten_advantages):
            raise ShiftkitError("agentic rl: whiten_unbiased applies with algo=ppo and whiten_advantages=true")
        if self.rollout_rows:
            raise ShiftkitError("agentic rl: rollout_rows does not apply (episodes are sampled turn by turn); leave it at 0")
        check_dependent(self, {**AGENT_DEPENDENT, **kit.SAMPLES_RULES}, "agent train")

    def validate_task(self) -> None:
        """task=kernels: its inputs and keys, checked before anything is written."""
        if self.task != "kernels":
            return
        if not self.model or not self.data:
            raise ShiftkitError("agent train task=kernels needs model=<HF model dir> and data=<problem rows>")
        if self.actions not in ("tools", "grammar"):
            raise ShiftkitError(f"agent train: actions must be tools or grammar, got {self.actions!r}")
        if self.eval_every and not self.eval_data:
            raise ShiftkitError("agent train task=kernels: eval_every > 0 needs eval_data=<held-out problem rows> (or eval_every=0)")
        self.check_kernel_keys("agent train")
        self.check_tool_keys("agent train")
        from shiftkit.kernels.pool import CLIENT_FIELDS

        bad = sorted(k for k in self.kernel_config if k not in CLIENT_FIELDS)
        if bad:
            raise ShiftkitError(f"agent train: kernel_config field(s) {', '.join(bad)} cannot be set per request; "
                                f"known: {', '.join(sorted(CLIENT_FIELDS))}")


_KERNELS = (lambda c: c.task == "kernels", "with task=kernels")
_TOY = (lambda c: c.task == "toy", "with task=toy")
AGENT_DEPENDENT = {**{k: _KERNELS for k in ("model", "data", "eval_data", "actions", "obs_max_tokens", "backend", "tools",
                                             "skill_in_prompt", "tool_timeout_s")},
                   **{k: _TOY for k in ("warm_dir", "warm_steps", "warm_batch", "warm_lr", "warm_p_correct")},
                   **kernel_env_rules(lambda c: c.task == "kernels", lambda c: c.task == "kernels", "with task=kernels",
                                      "with task=kernels"),
                   "rollout_sync": (lambda c: bool(c.rollout_url), "with served rollouts (rollout_url)")}


def warm_start(cfg: AgenticRLConfig, progress: bool = False) -> Path:
    """Behaviour cloning of a tiny Qwen3 (0.23M) on noisy demonstrations (assistant tokens only). Cached."""
    path = Path(cfg.warm_dir or Path(cfg.out).parent / "warm")
    if (path / "config.json").is_file():
        return path
    tok = make_char_tokenizer()
    torch.manual_seed(1234)
    model = make_tiny_model(WEAK_SPEC, seed=1234)
    opt = kit.make_optimizer(model, cfg.warm_lr, 0.0)
    rng = random.Random("warm")
    curve = []
    for s in range(cfg.warm_steps):
        kit.set_lr(opt, kit.lr_at(s, cfg.warm_lr, 20, cfg.warm_steps, "linear"))
        curve.append(masked_sft_step(model, opt, demo_rows(tok, rng, cfg.warm_batch, cfg.warm_p_correct), tok.pad_token_id))
        if progress and s % 50 == 0:
            print(f"warm {s} loss {curve[-1]:.3f}", file=sys.stderr, flush=True)
    save_model(model, tok, path, extra_files={"warm_start.json": json.dumps({"steps": cfg.warm_steps, "final_loss": curve[-1]})})
    return path


def draw(seed: int, step: int, n: int, split: str = "train") -> list[toytask.ToyProblem]:
    rng = random.Random(f"toy:{split}:{seed}:{step}")
    return [toytask.draw_problem(rng) for _ in range(n)]


def evaluate_toy(model, tok, problems, max_turns: int, max_new: int, temperature: float = 1.0, seed: int = 0) -> dict:
    """Held-out success with sampling at the training temperature and fixed seeds (greedy decoding hides
    the policy's mixture: it always picks the plurality behaviour)."""
    seeds = [seed * 7919 + 500_000 + i for i in range(len(problems))]
    eps, _ = toy_rollouts(model, tok, problems, max_turns, max_new, temperature, seeds)
    n = len(eps)
    return {"success": sum(e.reward for e in eps) / n, "correct_call_rate": sum(e.called_correctly for e in eps) / n,
            "malformed_call_rate": sum(e.malformed_calls > 0 for e in eps) / n}


def value_pretrain(policy, critic, tok, cfg: AgenticRLConfig, copt, task) -> dict:
    """Fit the critic to GAE targets on rollouts of the frozen policy; report held-out error before/after."""
    G = cfg.group_size
    held_eps, held_rows = task.rollouts(policy, tok, [p for p in task.draw(cfg.seed, 0, cfg.prompts_per_step, "vp_heldout") for _ in range(G)],
                                        list(range(900_000, 900_000 + cfg.prompts_per_step * G)))
    held = collate(held_rows, tok.pad_token_id)
    held_r = scorable_rewards(held_eps, held)
    before = critic_error(critic, held, held_r)
    data = []
    for k in range(cfg.value_pretrain_batches):
        probs = [p for p in task.draw(cfg.seed, k, cfg.prompts_per_step, "vp") for _ in range(G)]
        eps, rows = task.rollouts(policy, tok, probs, [800_000 + k * 1000 + i for i in range(len(probs))])
        batch = collate(rows, tok.pad_token_id)
        data.append((batch, scorable_rewards(eps, batch)))
    curve = []
    for s in range(cfg.value_pretrain_steps):
        batch, r_B = data[s % len(data)]
        with torch.no_grad():
            old_v = critic(batch)
        _, ret = advantages.gae(advantages.terminal_rewards(r_B, batch["gen_BT"]), old_v, batch["gen_BT"], cfg.gamma, cfg.lam)
        v = critic(batch)
        loss, _ = losses.value_loss(v, old_v, ret, batch["gen_BT"], clip=None)
        copt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), cfg.grad_clip)
        copt.step()
        curve.append(float(loss.detach()))
    after = critic_error(critic, held, held_r)
    return {"before": before, "after": after, "steps": cfg.value_pretrain_steps, "loss_curve": curve,
            "heldout_success": float(held_r.mean())}


def unscorable_nan(eps: list, r_B: torch.Tensor) -> torch.Tensor:
    """``r_B`` with NaN where the episode is unscorable (:func:`shiftkit.advantages.group_advantages` leaves
    those rows out of their group's mean and std and gives them advantage 0)."""
    return torch.where(torch.tensor([e.reward is None for e in eps]), torch.full_like(r_B, float("nan")), r_B)


def scorable_rewards(eps: list, batch: dict) -> torch.Tensor:
    """The episodes' rewards; an unscorable episode (reward None: the environment could not judge it) gets 0
    and its generated tokens leave ``batch["gen_BT"]``, so it carries no loss, advantage or value target."""
    rs = [e.reward for e in eps]
    ok_B = torch.tensor([r is not None for r in rs])
    batch["gen_BT"] = batch["gen_BT"] * ok_B[:, None].to(batch["gen_BT"].dtype)
    return torch.tensor([float(r) if r is not None else 0.0 for r in rs])


class ToyTask:
    """``task=toy``: the calculator tool task (:mod:`shiftkit.agent.toytask`) behind the loop's task interface
    (``policy``, ``draw``, ``rollouts``, ``evaluate``, ``stats``, ``sample_rows``, ``close``; as
    :class:`shiftkit.agent.kernel_task.KernelTask`)."""

    def __init__(self, cfg: AgenticRLConfig):
        self.cfg = cfg

    def policy(self, d):
        if d.is_main:  # the cached warm start, built once
            warm_start(self.cfg, self.cfg.progress)
        d.barrier()
        return load_model_and_tokenizer(warm_start(self.cfg, self.cfg.progress))

    def draw(self, seed: int, step: int, n: int, split: str = "train"):
        return draw(seed, step, n, split)

    def rollouts(self, model, tok, problems, seeds, sampler=None, logps=None):
        c = self.cfg
        return toy_rollouts(model, tok, problems, c.max_turns, c.max_new_tokens, c.temperature, seeds, sampler, logps)

    def evaluate(self, model, tok) -> dict:
        c = self.cfg
        return evaluate_toy(model, tok, draw(c.seed, 0, c.eval_n, "eval"), c.max_turns, c.max_new_tokens)

    def stats(self, eps) -> dict:
        n = len(eps)
        return {"correct_call_rate": sum(e.called_correctly for e in eps) / n,
                "malformed_call_rate": sum(e.malformed_calls > 0 for e in eps) / n, "turns": sum(len(e.turns) for e in eps) / n}

    def sample_rows(self, step: int, eps, n: int) -> list[dict]:
        return [{"step": step + 1, "prompt": e.problem.prompt, "turns": e.turns, "tool_outputs": e.tool_outputs,
                 "reward": e.reward} for e in eps[:n]]

    def close(self) -> None:
        pass


def make_task(cfg: AgenticRLConfig):
    """The task of ``cfg.task``; its inputs load and validate here, before the run writes anything."""
    if cfg.task == "kernels":
        from shiftkit.agent.kernel_task import KernelTask

        return KernelTask(cfg)
    return ToyTask(cfg)


def run_agentic_rl(cfg: AgenticRLConfig) -> dict:
    """The loop, in a run directory (``cfg.out``) that resumes after a kill; returns the summary."""
    cfg.validate()
    client = served_rollouts(cfg.rollout_url, cfg.rollout_sync)  # an unreachable server fails before anything is written
    task = make_task(cfg)  # its inputs load and validate before anything is written
    try:
        return _train(cfg, task, client)
    finally:
        task.close()


def _train(cfg: AgenticRLConfig, task, client) -> dict:
    d, run = kit.open_run(cfg)
    if run.done:
        return run.summary()
    if d.world > 1 and d.device.type != "cpu":
        raise ShiftkitError("agentic rl: several processes run on CPU only (the episodes' batches are CPU tensors); "
                            "launch with --cpu or CUDA_VISIBLE_DEVICES=''")
    policy, tok = task.policy(d)
    torch.manual_seed(cfg.seed)
    critic = ValueModel(policy) if cfg.algo == "ppo" else None  # from the full policy, before any adapters
    policy = prepare_policy(policy, cfg)  # LoRA adapters, activation checkpointing
    policy.train()
    train_policy = d.wrap(policy)  # DDP wrappers, or FSDP2: sharded in place (before the optimizers)
    train_critic = d.wrap(critic) if critic is not None else None
    opt = kit.make_optimizer(policy, cfg.lr, 0.0)
    copt = kit.make_optimizer(critic, cfg.critic_lr, 0.0, betas=(0.9, 0.999)) if critic is not None else None
    st = kit.resume(run, policy, opt, d, cfg.steps, f"agent-{cfg.algo} s{cfg.seed}", cfg.progress)
    extra = dict(st.extra)
    if critic is not None and "critic" in extra:  # resumed: the critic and its optimizer are in the checkpoint
        load_full_state_dict(critic, extra["critic"])
        load_optimizer_state(critic, copt, extra["critic_opt"])
    elif critic is not None and cfg.value_pretrain_steps:
        with d.gathered(policy):  # every rank pretrains on the same rollouts (averaged gradients: one process's)
            extra["value_pretrain"] = value_pretrain(policy, train_critic, tok, cfg, copt, task)

    def eval_fn() -> dict:
        return {f"eval/{k}": v for k, v in task.evaluate(policy, tok).items()}

    kit.first_eval(st, eval_fn)
    if client is not None:  # the server samples from the run's policy (the warm start, or the resumed checkpoint)
        client.sync_weights(policy, tok, run.path / "rollout_weights", d)
    if st.first_eval:
        extra["initial_eval"] = {k[5:]: v for k, v in st.first_eval.items() if k.startswith("eval/")}
    P, G = cfg.prompts_per_step, cfg.group_size
    dtype, chunk = microbatch.autocast_dtype(cfg.autocast), cfg.logit_chunk or None
    row: dict = {}
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        mine = d.shard(list(range(P)))  # this rank's prompts, each with its group
        probs = [p for i, p in enumerate(task.draw(cfg.seed, step, P)) if i in mine for _ in range(G)]
        seeds = [kit.row_seed(cfg.seed, step, i, j) for i in mine for j in range(G)]
        lps = [] if client is not None else None
        with d.gathered(policy):
            eps, rows = task.rollouts(policy, tok, probs, seeds, sampler=client.sample if client is not None else None,
                                      logps=lps)
        batch = collate(rows, tok.pad_token_id, lps)
        r_B = scorable_rewards(eps, batch)
        gen_BT = batch["gen_BT"]
        mbs = microbatch.micro_batches(batch["pmask_BP"], batch["valid_BT"], cfg.token_budget, d=d,
                                       packed=cfg.packing)  # memory: one micro-batch at a time
        train = {k: v for k, v in batch.items() if k != "rollout_logp_BT"}
        with torch.no_grad():
            old_logp_BT = logprobs.score_mb(policy, train["prompt_BP"], train["pmask_BP"], train["rest_BT"],
                                       train["valid_BT"], mbs, dtype=dtype, chunk=cfg.logit_chunk)
            old_v_BT = (microbatch.per_micro_batch(mbs, gen_BT, lambda mb: critic(micro(train, mb)))
                        if critic is not None else None)
        if cfg.algo == "grpo":
            adv_BT, ret_BT = advantages.group_advantages(unscorable_nan(eps, r_B), G)[:, None].expand_as(gen_BT).float() * gen_BT, None
        else:
            adv_BT, ret_BT = advantages.gae(advantages.terminal_rewards(r_B, gen_BT), old_v_BT, gen_BT, cfg.gamma, cfg.lam)
            if cfg.whiten_advantages:
                adv_BT = advantages.whiten(adv_BT, gen_BT, unbiased=cfg.whiten_unbiased, d=d)  # over every rank's tokens
        has_signal = bool(d.sum((adv_BT != 0).sum()) > 0)  # e.g. GRPO with every group all-right or all-wrong
        ev_critic = losses.explained_variance(old_v_BT, returns_mc(r_B, gen_BT), gen_BT) if critic is not None else None
        n_gen = d.sum(gen_BT.sum()).float()  # the global count: losses are global-count means
        u = policy_update(cfg, policy, train_policy, opt, d, train, adv_BT, old_logp_BT, dtype=dtype, chunk=chunk)
        gnorm, loss_sum, clip_sum, ent_sum, n_trained = u
        for _ in range(cfg.ppo_epochs if critic is not None else 0):  # the critic: as many passes (it shares nothing)
            vloss, vmse = value_update(train_critic, copt, d, train, mbs, old_v_BT, ret_BT, n_gen, cfg)
        n = max(float(gen_BT.sum()), 1.0)  # this rank's tokens (clip_frac, entropy: rank 0's share)
        stats = global_episode_stats(eps, batch, task, d, P * G)
        row = {**stats, "loss": float(loss_sum), "clip_frac": float(clip_sum / n),
               "micro_batches": len(mbs), **({"entropy": ent_sum / n_trained} if n_trained else {}),
               "grad_norm": gnorm, "has_signal": has_signal, "step_time": time.time() - t0}
        if critic is not None:
            row.update({"value_loss": vloss, "value_mse": vmse, "critic_explained_variance": ev_critic})
        if client is not None:  # the server's log-probs vs the trainer's for the same tokens, then the new weights
            gap = logprob_gap(batch["rollout_logp_BT"], old_logp_BT, gen_BT)
            row.update({f"rollout/logprob_gap_{k}": v for k, v in gap.items()})
            client.sync_weights(policy, tok, run.path / "rollout_weights", d)
        kit.write_samples(st, step, cfg.samples_every, lambda: task.sample_rows(step, eps, cfg.samples_n))
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn if cfg.eval_every else None,
                     reward=f"{row['reward']:.3f}")
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, policy, tok, opt, extra=lambda: {**extra, **(
            {"critic": full_state_dict(critic), "critic_opt": optimizer_state(critic, copt)} if critic is not None else {})})
    with d.gathered(policy):  # the final evaluation, on every rank
        summary = run_summary(cfg, st, extra, eval_fn)
    return kit.close_run(st, policy, tok, summary, row)


def policy_update(cfg: AgenticRLConfig, policy, train_policy, opt, d, train: dict, adv_BT, old_logp_BT, *, dtype,
                  chunk):
    """``ppo_epochs`` passes of :func:`shiftkit.losses.policy_loss` (clip keys by :func:`shiftkit.losses.ppo_clip`),
    then the clipped step. Rows with advantage 0 on every generated token carry no gradient: they get no forward
    or backward (the loss keeps the whole batch's token count), and a batch without any skips the step.
    ``train_policy``: ``policy`` as the launcher wraps it (DDP, or the FSDP2-sharded module itself), for the
    forward and backward. Returns ``(grad norm, loss, clip sum, entropy sum over the trained rows, their
    generated tokens)``."""
    gen_BT = train["gen_BT"]
    trained_B = microbatch.rows_with_gradient(adv_BT, gen_BT)
    mbs = microbatch.micro_batches(train["pmask_BP"], train["valid_BT"], cfg.token_budget, d=d, keep_B=trained_B,
                                   packed=cfg.packing)
    clip, n_gen = losses.ppo_clip(cfg.clip_low, cfg.clip_high, cfg.clip_dual), d.sum(gen_BT.sum()).float()
    for _ in range(cfg.ppo_epochs):
        opt.zero_grad(set_to_none=True)
        loss_sum, clip_sum, ent_sum = torch.zeros(()), 0.0, 0.0
        for mb in microbatch.accumulating(train_policy, mbs):
            b = micro(train, mb)
            logp_bt, ent_bt = policy_logp(train_policy, b, dtype, chunk, packed=mb.packed)
            loss, pm = losses.policy_loss(logp_bt, mb.completion(old_logp_BT), mb.completion(adv_BT), b["gen_BT"],
                                          **clip, num_tokens=n_gen)
            clip_sum += float(pm["clip_frac"]) * float(b["gen_BT"].sum()) * mb.scale
            ent_sum += float((ent_bt * b["gen_BT"]).sum()) * mb.scale
            loss = loss * mb.scale
            (loss * d.world).backward()
            loss_sum = loss_sum + loss.detach().float().cpu()
        gnorm = kit.clip_and_step(policy, opt, cfg.grad_clip, skip=not mbs)
    return gnorm, loss_sum, clip_sum, ent_sum, float((gen_BT * trained_B[:, None]).sum())


def value_update(critic, copt, d, train: dict, mbs: list, old_v_BT, ret_BT, n_gen, cfg: AgenticRLConfig):
    """One clipped-value-loss step of the critic over the micro-batches; ``(loss, value MSE)``."""
    copt.zero_grad(set_to_none=True)
    loss_sum, mse_sum = torch.zeros(()), 0.0
    for mb in microbatch.accumulating(critic, mbs):
        b = micro(train, mb)
        loss, vm = losses.value_loss(critic(b), mb.completion(old_v_BT), mb.completion(ret_BT), b["gen_BT"],
                                     clip=cfg.value_clip, num_tokens=n_gen)
        mse_sum += float(vm["value_mse"]) * float(b["gen_BT"].sum()) * mb.scale
        loss = loss * mb.scale
        (loss * d.world).backward()
        loss_sum = loss_sum + loss.detach().float().cpu()
    kit.clip_and_step(critic, copt, cfg.grad_clip)
    return float(loss_sum), mse_sum / max(float(train["gen_BT"].sum()), 1.0)


def episode_stats(eps: list, batch: dict, task) -> dict:
    """Reward (over the scorable episodes), the task's behaviour statistics and token counts of one step."""
    gen_BT = batch["gen_BT"]
    ok = [float(e.reward) for e in eps if e.reward is not None]
    return {"reward": sum(ok) / len(ok) if ok else float("nan"), **task.stats(eps),
            "gen_tokens": float(gen_BT.sum(-1).float().mean()),
            "tool_tokens": float(((batch["valid_BT"] - gen_BT).clamp(min=0)).sum(-1).float().mean())}


def global_episode_stats(eps: list, batch: dict, task, d, n_all: int) -> dict:
    """:func:`episode_stats` over every rank's episodes (``n_all`` of them): each statistic's episode-weighted
    mean, the reward's over the scorable episodes of all ranks."""
    local = episode_stats(eps, batch, task)
    ok = [float(e.reward) for e in eps if e.reward is not None]
    n_ok = float(d.sum(len(ok)))
    out = {k: float(d.sum(v * len(eps))) / n_all for k, v in local.items() if k != "reward"}
    return {"reward": float(d.sum(sum(ok))) / n_ok if n_ok else float("nan"), **out}


def run_summary(cfg: AgenticRLConfig, st: kit.RunState, extra: dict, eval_fn) -> dict:
    """The run's summary: first and last rewards (over every step, resumed or not) and the final evaluation."""
    rewards = [r["reward"] for r in read_jsonl(st.run.path / "metrics.jsonl") if "reward" in r]
    k = max(1, min(5, len(rewards) // 4))
    return {"algo": cfg.algo, "seed": cfg.seed, "config": dataclasses.asdict(cfg), "steps": cfg.steps,
            "train_seconds": round(time.time() - st.t_start, 1), "reward_first": sum(rewards[:k]) / k,
            "reward_last": sum(rewards[-k:]) / k, "initial_eval": extra.get("initial_eval"),
            "final_eval": {k_[5:]: v for k_, v in eval_fn().items()},
            **({"value_pretrain": extra["value_pretrain"]} if "value_pretrain" in extra else {})}


# ----------------------------------------------------------------------------- kernel trajectories (mechanics)


def kernel_rl_step(events_list: list[list[dict]], policy, tok, algo: str = "ppo", critic=None, lr: float = 1e-4,
                   max_len: int = 4096, clip_low: float = 0.2, clip_high: float = 0.28, gamma: float = 1.0,
                   lam: float = 0.95) -> dict:
    """One policy (+ critic) update on kernel-agent trajectories, all treated as one group: chat rows
    tokenized with assistant-only masks, trajectory rewards = the episodes' final rewards, GRPO group
    advantages or PPO/GAE from the critic, then :func:`shiftkit.losses.policy_loss` and the value loss.
    Mechanics only: with a scripted/tiny policy nothing is learned."""
    events_list = [ev for ev in events_list if end_of(ev)["final_reward"] is not None]  # unscorable: no update
    rows = [{"messages": messages_of(ev), "tools": ev[0]["tools"]} for ev in events_list]
    ex = chat_examples(tok, rows, max_len)
    batch = collate(ex, tok.pad_token_id)
    gen = batch["gen_BT"]
    r_B = torch.tensor([float(end_of(ev)["final_reward"]) for ev in events_list])
    policy.train()
    opt = torch.optim.AdamW(policy.parameters(), lr=lr)
    with torch.no_grad():
        old_logp, _ = policy_logp(policy, batch)
    m: dict = {"rewards": r_B.tolist(), "gen_tokens": int(gen.sum()), "context_tokens": int((batch["valid_BT"] - gen).sum()),
               "algo": algo}
    if algo == "grpo":
        adv = advantages.group_advantages(r_B, len(events_list))[:, None].expand_as(gen).float() * gen
    else:
        critic = critic or ValueModel(policy)
        copt = torch.optim.AdamW(critic.parameters(), lr=lr)
        with torch.no_grad():
            old_v = critic(batch)
        adv, ret = advantages.gae(advantages.terminal_rewards(r_B, gen), old_v, gen, gamma, lam)
        adv = advantages.whiten(adv, gen)
    logp, _ = policy_logp(policy, batch)
    loss, pm = losses.policy_loss(logp, old_logp, adv, gen, **losses.ppo_clip(clip_low, clip_high))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    m["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0))
    opt.step()
    m.update({"policy_loss": float(loss.detach()), "clip_frac": float(pm["clip_frac"])})
    if algo == "ppo":
        vloss, vm = losses.value_loss(critic(batch), old_v, ret, gen, clip=0.2)
        copt.zero_grad(set_to_none=True)
        vloss.backward()
        copt.step()
        m.update({"value_loss": float(vloss.detach()), "value_mse": float(vm["value_mse"])})
    with torch.no_grad():
        new_logp, _ = policy_logp(policy, batch)
    m["approx_kl"] = float(losses.masked_mean(old_logp - new_logp, gen.bool()))
    return m
