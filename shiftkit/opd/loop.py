"""Direct-OPD (and the vanilla-OPD baseline): one readable loop.

Per step: draw ``prompts_per_step`` prompts from ``(seed, step)``; the **student** samples
``samples_per_prompt`` completions each (on-policy, per-row seeds); one student forward gives the
candidates (the sampled token, the student's top-K, or the whole vocabulary) and their log-probs;
the post-RL **teacher** and its pre-RL **reference** score the student's own token ids at those
candidates (full forward, exact log-softmax, fp32 by default, same engine and dtype); the reward is
``Delta = log pi_teacher - log pi_ref`` and the advantage ``sg[w * Delta]``
(:func:`shiftkit.advantages.direct_opd`); the loss is the PPO surrogate over candidates
(:func:`shiftkit.losses.candidate_policy_loss`, token-mean) plus ``alpha * k3 KL`` on the sampled
token to the student's policy at the start of the stage. ``alpha`` follows the official sign-based
controller (:func:`shiftkit.advantages.adaptive_kl_coef`), updated from this batch's weighted mean
reward before the update (as verl does). The bookkeeping (run directory, resume, logging,
checkpoints, the prompt draws and row seeds shared with GRPO) is the training kit's
(:mod:`shiftkit.loopkit`); the logged diagnostics are :mod:`shiftkit.opd.diagnostics`.

``method=vanilla_opd`` uses ``A = -(log pi_student - log pi_teacher)`` at the sampled token instead.
``stages`` runs a sequence of (teacher, reference, steps, KL) transfers, each re-anchoring its KL
to the checkpoint it starts from and writing its own checkpoint (``<out>/stage<i>/final``).
Under ``accelerate launch`` each rank takes a strided share of the prompts; losses use global
token counts and the KL controller a global reward mean, so ranks stay identical.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from pathlib import Path

import torch

from shiftkit import advantages as A
from shiftkit import logprobs as LP
from shiftkit import losses
from shiftkit import loopkit as kit
from shiftkit import microbatch as MB
from shiftkit.config import check_dependent, to_dict
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.opd.diagnostics import collapsed, delta_moments, opd_diagnostics
from shiftkit.rl import PROMPT_DEPENDENT, GRPOConfig
from shiftkit.runs import RunDir, open_run_dir

METHODS = ("direct_opd", "vanilla_opd", "grpo")
KL_MODES = ("adaptive", "fixed", "none")
STAGE_KEYS = {"teacher", "teacher_ref", "steps", "kl_mode", "kl_coef", "kl_eps", "kl_min", "kl_max",
              "reward_mode", "lr"}


@dataclasses.dataclass
class OPDConfig(MB.MemoryConfig):
    student: str = ""  # HF dir or hub id: the model trained (and, per stage, its KL anchor)
    teacher: str = ""  # the weak model after RL
    teacher_ref: str = ""  # the same weak model before RL
    method: str = "direct_opd"  # direct_opd | vanilla_opd | grpo (baselines)
    stages: list[dict] = dataclasses.field(default_factory=list)  # composition: [{teacher, teacher_ref, steps, ...}]
    out: str = "runs/opd"  # run directory (config.json, metrics.jsonl, samples.jsonl, checkpoints/, final/)
    # -- data, prompts, reward (shiftkit.data / shiftkit.prompts / shiftkit.rewards) --
    data: str = ""  # prompts: a .jsonl/.json/.parquet/.csv/.txt file, a dataset dir, a cached hub id, or arith:add,mul
    prompts: str = ""  # alias of data= (a prompt file: JSONL with a prompt column, or .txt with one per line)
    tasks: list[str] = dataclasses.field(default_factory=list)  # shorthand for data=arith:<tasks> (the toy tasks)
    split: str = ""  # dataset split ("" = the only one, else train)
    subset: str = ""  # hub/directory dataset configuration name
    prompt_key: str = "prompt"  # column with the prompt (a string or chat messages)
    answer_key: str = "answer"  # column with the reference answer (only read by a reward)
    system_prompt: str = ""  # system message added to every prompt
    shuffle: bool = True  # seeded shuffle of the rows and of each epoch
    max_samples: int = 0  # keep at most this many rows (0 = all)
    chat_template: str = "auto"  # auto (the tokenizer's if it has one) | true (required) | false (raw text)
    template: str = "{prompt}"  # wraps the user text: a string with {prompt}, or plain | dapo
    chat_template_kwargs: dict = dataclasses.field(default_factory=dict)  # passed to apply_chat_template
    reward: list[str] = dataclasses.field(default_factory=list)  # optional outcome reward, logged (and mixed in with grpo_weight)
    reward_weights: list[float] = dataclasses.field(default_factory=list)  # one weight per reward
    samples_every: int = GRPOConfig.samples_every  # write rollouts with their per-token Delta summary to samples.jsonl every N steps
    samples_n: int = GRPOConfig.samples_n  # rollouts per samples.jsonl dump
    report_to: str = GRPOConfig.report_to  # none | tensorboard | wandb (through accelerate's trackers)
    steps: int = GRPOConfig.steps
    prompts_per_step: int = GRPOConfig.prompts_per_step  # official: 128
    samples_per_prompt: int = 4  # official n = 4
    max_new_tokens: int = GRPOConfig.max_new_tokens  # official: 2048
    temperature: float = GRPOConfig.temperature
    top_p: float = GRPOConfig.top_p
    reward_mode: str = "student_topk"  # sampled | student_topk | full_vocab
    top_k: int = 16
    reward_scale: float = 1.0  # lambda (official: 1)
    delta_clip: float = 0.0  # clamp Delta to +-delta_clip (official: none)
    top_q: float = 1.0  # keep the reward only at the top-q fraction of positions by teacher/ref JSD (S2D: 0.1)
    grpo_weight: float = 0.0  # w: add w * GRPO outcome advantage (needs tasks and samples_per_prompt >= 2)
    kl_mode: str = "adaptive"  # adaptive (official) | fixed | none
    kl_coef: float = 2.5  # alpha_0 (adaptive) or alpha (fixed)
    kl_eps: float = 0.01
    kl_min: float = 0.5
    kl_max: float = 2.5
    kl_clamp: bool = GRPOConfig.kl_clamp  # clamp the k3 log-ratio to [-20, 20] and the k3 to 10, as verl's low_var_kl
    lr: float = 1e-6  # official (1.7B students); the toy experiment uses 2e-4
    warmup: int = GRPOConfig.warmup
    schedule: str = GRPOConfig.schedule
    weight_decay: float = GRPOConfig.weight_decay
    grad_clip: float = GRPOConfig.grad_clip
    aggregation: str = GRPOConfig.aggregation
    clip_low: float = GRPOConfig.clip_low  # PPO clip (0 = off: with one epoch the update is REINFORCE, as official)
    clip_high: float = GRPOConfig.clip_high  # 0 = same as clip_low; set alone, it clips the ratio above only
    ppo_epochs: int = GRPOConfig.ppo_epochs
    score_dtype: str = "float32"  # teacher, reference and anchor scoring dtype (anchor at `temperature`)
    allow_tokenizer_mismatch: bool = False
    determinism_tol: float = 1e-4
    guard_patience: int = 5  # consecutive collapsed steps before stopping (0 = guard off)
    guard_min_eos_rate: float = 0.1
    guard_min_len_frac: float = 0.2  # collapse if mean length < this x the stage's first-step length
    seed: int = GRPOConfig.seed
    eval_every: int = GRPOConfig.eval_every
    eval_n: int = GRPOConfig.eval_n
    save_every: int = GRPOConfig.save_every
    threads: int = GRPOConfig.threads
    overwrite: bool = GRPOConfig.overwrite
    progress: bool = GRPOConfig.progress

    def validate(self) -> None:
        self.validate_memory("opd")
        if not self.student:
            raise ShiftkitError("opd needs a student (--student or student=<path or hub id>)")
        if self.method not in METHODS:
            raise ShiftkitError(f"opd: method must be one of {', '.join(METHODS)}, got '{self.method}'")
        if self.reward_mode not in A.OPD_REWARD_MODES:
            raise ShiftkitError(f"opd: reward_mode must be one of {', '.join(A.OPD_REWARD_MODES)}, "
                                f"got '{self.reward_mode}'")
        if self.kl_mode not in KL_MODES:
            raise ShiftkitError(f"opd: kl_mode must be one of {', '.join(KL_MODES)}, got '{self.kl_mode}'")
        if self.steps <= 0 or self.prompts_per_step <= 0 or self.samples_per_prompt <= 0 or self.top_k <= 0:
            raise ShiftkitError("opd: steps, prompts_per_step, samples_per_prompt and top_k must be positive")
        if not 0 < self.top_q <= 1:
            raise ShiftkitError(f"opd: top_q must be in (0, 1], got {self.top_q}")
        if self.aggregation not in losses.AGGREGATIONS:
            raise ShiftkitError(f"opd: aggregation must be token_mean or seq_mean, got '{self.aggregation}'")
        if self.grpo_weight and self.samples_per_prompt < 2:
            raise ShiftkitError("opd: grpo_weight needs samples_per_prompt >= 2 (the GRPO group)")
        if self.prompts and (self.data or self.tasks):
            raise ShiftkitError("opd: prompts= is an alias of data=; give one source (data, prompts or tasks)")
        from shiftkit.rl import check_unread

        kit.check_report_to(self.report_to)

        check_unread(dataclasses.replace(self, data=self.data or self.prompts, prompts=""), "opd")
        check_dependent(self, OPD_DEPENDENT, "opd")
        unread = [k for k in UNREAD.get(self.method, ()) if getattr(self, k) != _DEFAULTS[k]]
        if unread:
            raise ShiftkitError(f"opd: method={self.method} does not read {', '.join(unread)} (leave "
                                f"{'it' if len(unread) == 1 else 'them'} at the default)")
        if self.method == "vanilla_opd":
            bad = sorted({k for st in self.stages if isinstance(st, dict) for k in st} & set(UNREAD["vanilla_opd"]))
            if bad:
                raise ShiftkitError(f"opd: method=vanilla_opd does not read the stage key '{bad[0]}'")
        if self.method == "grpo":
            if self.samples_per_prompt < 2:
                raise ShiftkitError("opd method=grpo needs samples_per_prompt >= 2 (the GRPO group)")
            return
        if self.stages:
            if self.teacher or self.teacher_ref:
                raise ShiftkitError("opd: give either teacher/teacher_ref or stages, not both")
            for i, st in enumerate(self.stages):
                if not isinstance(st, dict):
                    raise ShiftkitError(f"opd: stage {i} must be a mapping, got {st!r}")
                bad = sorted(set(st) - STAGE_KEYS)
                if bad:
                    raise ShiftkitError(f"opd: unknown key '{bad[0]}' in stage {i}; valid: {', '.join(sorted(STAGE_KEYS))}")
                if not st.get("teacher") or (self.method == "direct_opd" and not st.get("teacher_ref")):
                    raise ShiftkitError(f"opd: stage {i} needs teacher and teacher_ref")
        else:
            if not self.teacher:
                raise ShiftkitError("opd needs a teacher (--teacher or teacher=<path>)")
            if self.method == "direct_opd" and not self.teacher_ref:
                raise ShiftkitError("opd method=direct_opd needs teacher_ref (the teacher before RL; --teacher-ref)")

    def stage_list(self) -> list["OPDConfig"]:
        """One flat config per stage (the stage's keys override the top-level ones)."""
        if not self.stages:
            return [self]
        out = []
        for st in self.stages:
            kw = {k: type(getattr(self, k))(v) for k, v in st.items()}
            out.append(dataclasses.replace(self, stages=[], **kw))
        return out


# Keys a method does not read: setting one away from its default is an error, not a silent no-op.
UNREAD = {
    "vanilla_opd": ("teacher_ref", "reward_mode", "delta_clip", "top_q"),
    "grpo": ("teacher", "teacher_ref", "stages", "prompts", "reward_mode", "top_k", "reward_scale", "delta_clip",
             "top_q", "grpo_weight", "kl_eps", "kl_min", "kl_max"),
}
OPD_DEPENDENT = {
    **PROMPT_DEPENDENT,
    "kl_eps": (lambda c: c.kl_mode == "adaptive", "with kl_mode=adaptive"),
    "kl_min": (lambda c: c.kl_mode == "adaptive", "with kl_mode=adaptive"),
    "kl_max": (lambda c: c.kl_mode == "adaptive", "with kl_mode=adaptive"),
    "kl_coef": (lambda c: c.kl_mode != "none", "with a KL (kl_mode adaptive|fixed)"),
    "kl_clamp": (lambda c: c.kl_mode != "none", "with a KL (kl_mode adaptive|fixed)"),
    "guard_min_eos_rate": (lambda c: c.guard_patience > 0, "with the collapse guard on (guard_patience > 0)"),
    "guard_min_len_frac": (lambda c: c.guard_patience > 0, "with the collapse guard on (guard_patience > 0)"),
}
_DEFAULTS = {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
             for f in dataclasses.fields(OPDConfig)}


def with_data(cfg: OPDConfig) -> OPDConfig:
    """``prompts=FILE`` is ``data=FILE`` (and reads only the file)."""
    return dataclasses.replace(cfg, data=cfg.prompts, prompts="") if cfg.prompts else cfg


class PromptSource:
    """The training prompts of a run (the data layer's source), drawn as the GRPO loop draws them."""

    def __init__(self, cfg: OPDConfig):
        from shiftkit.data import load_prompts
        from shiftkit.inputs import data_args

        self.ds = load_prompts(data_args(with_data(cfg), "opd", cfg.eval_n), seed=cfg.seed)

    def draw(self, seed: int, step: int, n: int) -> list:
        return self.ds.draw(seed, step, n)


def grpo_config(cfg: OPDConfig) -> GRPOConfig:
    """The step- and rollout-matched GRPO baseline on the student: every field the two configs share,
    plus the student as the policy, its samples per prompt as the group, and the KL only when fixed."""
    shared = {f.name for f in dataclasses.fields(GRPOConfig)} & {f.name for f in dataclasses.fields(OPDConfig)}
    cfg = with_data(cfg)
    kw = {k: copy.deepcopy(getattr(cfg, k)) for k in shared - {"kl_coef"}}
    return GRPOConfig(**kw, model=cfg.student, group_size=cfg.samples_per_prompt,
                      kl_coef=cfg.kl_coef if cfg.kl_mode == "fixed" else 0.0)


def preflight(cfg: OPDConfig, d: Dist) -> tuple[list[dict], dict, object]:
    """Load every model and the data and check them before anything is written.

    Returns per-stage scorers, info, and the run's :class:`shiftkit.inputs.Inputs`."""
    from shiftkit.inputs import prompt_inputs
    from shiftkit.models import check_tokenizer_matches, load_model_and_tokenizer
    from shiftkit.opd import preflight as pf
    from shiftkit.data import is_arith

    student, stok = load_model_and_tokenizer(cfg.student, device=d.device)
    check_tokenizer_matches(student, stok, cfg.student)
    src = with_data(cfg)
    arith = bool(src.tasks) or is_arith(src.data)
    inp = prompt_inputs(src, stok, "opd", need_reward=arith or bool(cfg.reward) or bool(cfg.grpo_weight),
                        eval_n=cfg.eval_n, model_path=cfg.student, want_eval=cfg.eval_every > 0)
    preview = list(inp.ds.items)[:16] if hasattr(inp.ds, "items") else inp.ds.draw(0, 0, 16)
    prompts = inp.prompt_texts(preview)  # the rendered prompts: every model must tokenize them alike
    stages, info = [], {"tokenizer_differences": [], "determinism_gap": 0.0}
    for i, st in enumerate(cfg.stage_list()):
        teacher, ttok = load_model_and_tokenizer(st.teacher, device=d.device)
        named = {"student": (student, stok), "teacher": (teacher, ttok)}
        ref = None
        if st.method == "direct_opd":
            ref, rtok = load_model_and_tokenizer(st.teacher_ref, device=d.device)
            pf.check_distinct(teacher, ref, st.teacher, st.teacher_ref)
            named["teacher_ref"] = (ref, rtok)
        info["tokenizer_differences"] += pf.check_tokenizers(named, prompts, cfg.allow_tokenizer_mismatch)
        scorers = {"teacher": teacher, **({"teacher_ref": ref} if ref is not None else {})}
        for m in scorers.values():
            m.eval().requires_grad_(False)
        gap = pf.check_determinism({**scorers, "student": student}, student, stok, prompts, cfg.score_dtype,
                                   cfg.determinism_tol)
        info["determinism_gap"] = max(info["determinism_gap"], gap)
        if ref is not None:  # the shift's anatomy on the student's own samples; warns if EOS/format dominate
            info.setdefault("shift_anatomy", []).append(pf.check_shift_anatomy(student, stok, teacher, ref, prompts,
                                                                               st, warn=d.is_main))
        stages.append({"cfg": st, "teacher": teacher, "ref": ref})
    del student
    return stages, info, inp


def run_opd(cfg: OPDConfig) -> dict:
    """Run Direct-OPD / vanilla OPD (one stage or a composition) or the GRPO baseline."""
    if cfg.method == "grpo":
        from shiftkit.rl import run_grpo

        return {"method": "grpo", **run_grpo(grpo_config(cfg))}
    kit.set_threads(cfg.threads)
    d = Dist()
    stages, info, src = preflight(cfg, d)  # nothing is written before this passes
    top = open_run_dir(cfg.out, to_dict(cfg), cfg.overwrite, d)
    if top.done:
        print(f"run {top.path} is already finished; returning its summary (overwrite=true to start over)",
              file=sys.stderr)
        return top.summary()
    start_path, t0, summaries, offset = cfg.student, time.time(), [], 0
    for i, st in enumerate(stages):
        run = top if len(stages) == 1 else open_run_dir(Path(cfg.out) / f"stage{i}", to_dict(st["cfg"]),
                                                        cfg.overwrite, d)
        s = run.summary() if run.done else _run_stage(st["cfg"], st["teacher"], st["ref"], start_path, run, d, src,
                                                      stage=i, step_offset=offset, last=len(stages) == 1)
        summaries.append(s)
        start_path, offset = s["out"], offset + st["cfg"].steps
    summary = {**summaries[-1], "method": cfg.method, "steps": offset, "train_seconds": time.time() - t0,
               "determinism_gap": info["determinism_gap"], "shift_anatomy": info.get("shift_anatomy", [])}
    if len(stages) > 1:
        summary["stages"] = summaries
        if d.is_main:
            from shiftkit.models import load_model_and_tokenizer

            model, tok = load_model_and_tokenizer(start_path)
            summary["out"] = str(top.final)
            top.finish(model, tok, summary)
        d.barrier()
    return summary


def _run_stage(cfg: OPDConfig, teacher, ref, start_path: str, run: RunDir, d: Dist, src, *,
               stage: int, step_offset: int, last: bool) -> dict:
    from shiftkit.inputs import samples_rows
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.rl import held_out_eval

    model, tok = load_model_and_tokenizer(start_path, device=d.device)
    model = kit.prepare_policy(model, cfg)  # LoRA adapters, activation checkpointing
    anchor = kit.frozen_copy(model, cfg) if cfg.kl_mode != "none" else None
    model.train()
    opt = kit.make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = kit.resume(run, model, opt, d, cfg.steps, f"{cfg.method} {run.path.name}", cfg.progress, cfg.report_to)
    alpha = st.extra.get("alpha", cfg.kl_coef if cfg.kl_mode != "none" else 0.0)
    ddp_model = d.wrap(model)
    eval_fn = held_out_eval(model, tok, src, cfg.max_new_tokens) if cfg.eval_every and src.rewards else None
    kit.first_eval(st, eval_fn, stage=stage, global_step=step_offset)
    clip_low = cfg.clip_low or None
    clip_high = (cfg.clip_high or cfg.clip_low) or None
    off_policy = kit.needs_old_logprobs(cfg.clip_low, cfg.clip_high, cfg.ppo_epochs, cfg.top_p)
    P, G, seed = cfg.prompts_per_step, cfg.samples_per_prompt, cfg.seed + 7919 * stage
    dtype, chunk = MB.autocast_dtype(cfg.autocast), cfg.logit_chunk or None
    row, bad_steps, first_len = {}, 0, None
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        problems = src.ds.draw(seed, step, P)
        mine, roll = kit.rollout(model, tok, src.prompts_for(problems), G, seed, step, d, rows=cfg.rollout_rows,
                                 max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
        t_sample = time.time() - t0
        mask_BT, comp_BT = roll.completion_mask_BT, roll.completion_ids_BT
        args = (roll.prompt_ids_BP, roll.prompt_mask_BP, comp_BT, mask_BT)
        n_tok, n_seq = d.sum(mask_BT.sum()), P * G
        mbs = MB.micro_batches(roll.prompt_mask_BP, mask_BT, cfg.token_budget, d=d)  # memory: one micro-batch
        # -- the per-token signal (shiftkit.advantages), micro-batch by micro-batch, no [B, T, V] -----
        sig = opd_signal(cfg, model, teacher, ref, roll, mbs, dtype=dtype, chunk=chunk, keep_old=off_policy)
        with torch.no_grad():
            anchor_logp_BT, t_anchor = (_timed(kit.score_mb, anchor, *args, mbs, dtype=cfg.score_dtype,
                                               temperature=cfg.temperature, chunk=cfg.logit_chunk)
                                        if anchor is not None else (None, 0.0))
        rewards_B, res = None, None
        ex_B = [problems[i] for i in mine for _ in range(G)]
        if src.rewards is not None:
            res = src.rewards.score(ex_B, roll.texts, step=step)
            rewards_B = torch.tensor(res.total).nan_to_num(0.0)
        outcome_B = ((A.group_advantages(rewards_B, G) * torch.tensor(res.scorable)).to(d.device)
                     if cfg.grpo_weight else None)
        wr_mean = float(d.sum((sig.reward_BT * mask_BT).sum()) / n_tok.clamp(min=1))
        if cfg.kl_mode == "adaptive":
            alpha = A.adaptive_kl_coef(alpha, wr_mean, cfg.kl_eps, cfg.kl_min, cfg.kl_max)
        # -- update ----------------------------------------------------------------------------------
        t5 = time.time()
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        for epoch in range(cfg.ppo_epochs):
            sums = {"pg": 0.0, "kl": 0.0, "clip": 0.0}

            def loss_fn(mb: MB.MicroBatch) -> torch.Tensor:
                m_bt = mb.completion(mask_BT)
                s = LP.model_head(ddp_model, mb.prompt(roll.prompt_ids_BP), mb.prompt(roll.prompt_mask_BP),
                                  mb.completion(comp_BT), m_bt, dtype=dtype, temperature=cfg.temperature)
                loss, lp_bt, pm = opd_policy_loss(cfg, s, sig, mb, comp_BT, mask_BT, outcome_B, on_policy=not off_policy,
                                                  clip_low=clip_low, clip_high=clip_high, num_tokens=n_tok,
                                                  num_seqs=n_seq, chunk=chunk)
                n = float(m_bt.sum()) * mb.scale
                sums["pg"] += float(loss.detach()) * mb.scale
                sums["clip"] += float(pm["clip_frac"]) * n
                if anchor_logp_BT is not None and alpha > 0:
                    kl_loss, kl_mean = losses.kl_penalty(lp_bt, mb.completion(anchor_logp_BT), m_bt, alpha,
                                                         cfg.aggregation, n_tok, n_seq, clamp=cfg.kl_clamp)
                    loss = loss + kl_loss
                    sums["kl"] += float(kl_mean) * n
                return loss

            loss, gnorm = kit.micro_step(model, ddp_model, opt, d, mbs, loss_fn, cfg.grad_clip)
        t_update = time.time() - t5
        n_mine = max(float(mask_BT.sum()), 1.0)
        pg_loss, kl_mean, clip_frac = sums["pg"], sums["kl"] / n_mine, sums["clip"] / n_mine
        # -- log, collapse guard, checkpoint ---------------------------------------------------------
        diag = opd_diagnostics(sig.moments, sig.pos_BT, mask_BT)
        eos_rate, resp_len = float(d.sum(roll.eos_B.sum()) / n_seq), float(n_tok / n_seq)
        row = {"step": step, "stage": stage, "global_step": step_offset + step, "loss": float(loss),
               "pg_loss": float(pg_loss), **diag, "reward/weighted_mean": wr_mean, "kl/alpha": alpha,
               "kl/k3": float(kl_mean), "response_len": resp_len, "eos_rate": eos_rate,
               "clip_frac": float(clip_frac), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "micro_batches": len(mbs), "time/sample": t_sample, **sig.times, "time/anchor_score": t_anchor,
               "time/update": t_update, "step_time": time.time() - t0}
        if rewards_B is not None:
            row["reward"] = float(d.sum(rewards_B.sum()) / n_seq)
            row.update({k: v for k, v in res.metrics.items() if k.startswith("rewards/")})
        kit.write_samples(st, step, cfg.samples_every, lambda: samples_rows(
            step, ex_B, roll.texts, {"total": res.total} if res is not None else None, None, cfg.samples_n,
            delta_summary(sig.delta_mean_BT, mask_BT, cfg.samples_n)))
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn, dmean=f"{diag['delta/mean']:.3f}",
                     alpha=f"{alpha:.2f}")
        first_len = resp_len if first_len is None else first_len
        bad_steps = bad_steps + 1 if collapsed(eos_rate, resp_len, first_len, cfg.guard_min_eos_rate,
                                               cfg.guard_min_len_frac) else 0
        _collapse_guard(cfg, st, stage, step, bad_steps, eos_rate, resp_len, first_len)
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt, extra={"alpha": alpha})
    summary = {"out": str(run.final), "stage": stage, "steps": cfg.steps, "train_seconds": time.time() - st.t_start,
               "final_alpha": alpha, "final_reward": row.get("reward")}
    return kit.close_run(st, model, tok, summary, row)


def delta_summary(delta_mean_BT: torch.Tensor, mask_BT: torch.Tensor, n: int) -> dict[str, list]:
    """Per rollout (the first ``n``): the per-token Delta (mean over candidates, 4 decimals) and its
    mean / min / max over the completion, for ``samples.jsonl``."""
    out: dict[str, list] = {"delta": [], "delta/mean": [], "delta/min": [], "delta/max": []}
    for b in range(min(n, delta_mean_BT.shape[0])):
        per_tok = delta_mean_BT[b].float()[mask_BT[b].bool()]
        out["delta"].append([round(float(x), 4) for x in per_tok])
        has = per_tok.numel() > 0
        out["delta/mean"].append(float(per_tok.mean()) if has else None)
        out["delta/min"].append(float(per_tok.min()) if has else None)
        out["delta/max"].append(float(per_tok.max()) if has else None)
    return out


@dataclasses.dataclass
class Signal:
    """One step's per-token OPD signal as full-batch tensors (the candidates' axis ``K``, never ``V``)."""

    ids_BTK: torch.Tensor | None  # candidate ids (None in full_vocab: every token)
    adv_BTK: torch.Tensor | None  # sg[w * Delta] (vanilla: -(log pi_s - log pi_t)), top_q applied
    old_lp_BTK: torch.Tensor | None  # the student's log-probs at the candidates before the update (off-policy)
    old_lp_BT: torch.Tensor | None  # ... and at the sampled token
    hidden: dict  # full_vocab: teacher/ref (and old student) last hidden states [B, T, H], to rebuild their heads
    head_w: dict  # ... and their output layers (weight, bias); the old student's is a copy from before the update
    keep_BT: torch.Tensor | None  # the top_q position mask
    reward_BT: torch.Tensor  # sum_k adv per position (the adaptive-KL signal)
    delta_mean_BT: torch.Tensor  # Delta averaged over the candidates, per position (samples.jsonl)
    moments: tuple  # (n, sum, sum of squares, count > 0) of Delta over (position, candidate)
    pos_BT: dict  # position diagnostics (opd.diagnostics.POSITION_STATS)
    times: dict  # seconds per scorer


@torch.no_grad()
def opd_signal(cfg: OPDConfig, model, teacher, ref, roll, mbs: list, *, dtype, chunk, keep_old: bool) -> Signal:
    """The student's candidates and the teachers' scores of them, micro-batch by micro-batch through
    chunked heads (:mod:`shiftkit.logprobs`): the advantage of :func:`shiftkit.advantages.direct_opd`
    (or :func:`~shiftkit.advantages.vanilla_opd_advantage`) without any ``[B, T, V]`` tensor."""
    from shiftkit.opd.diagnostics import POSITION_STATS, position_stats

    direct, mode, K = cfg.method == "direct_opd", cfg.reward_mode if cfg.method == "direct_opd" else "sampled", cfg.top_k
    comp_BT, mask_BT = roll.completion_ids_BT, roll.completion_mask_BT
    B, T = comp_BT.shape
    full = mode == "full_vocab"
    Kc = 1 if mode == "sampled" else K
    dev = comp_BT.device
    zeros = lambda *shape, dt=torch.float32: torch.zeros(*shape, dtype=dt, device=dev)  # noqa: E731
    ids_BTK = None if full else torch.zeros(B, T, Kc, dtype=torch.long, device=dev)
    adv_BTK = None if full else zeros(B, T, Kc)
    old_BTK = zeros(B, T, Kc) if keep_old and not full else None
    old_BT = zeros(B, T) if keep_old else None
    keep_BT = torch.zeros(B, T, dtype=torch.bool, device=dev) if cfg.top_q < 1 else None
    reward_BT, dmean_BT = zeros(B, T), zeros(B, T)
    names = POSITION_STATS if direct else POSITION_STATS[:4]
    pos_BT = {k: zeros(B, T) for k in names}
    hidden: dict = {}
    head_w: dict = {}
    n = s1 = s2 = npos = torch.zeros((), dtype=torch.float64)
    times = {"time/student_forward": 0.0, "time/teacher_score": 0.0, "time/ref_score": 0.0}
    for mb in mbs:
        if mb.scale == 0:
            continue  # a filler that keeps ranks in step
        a = (mb.prompt(roll.prompt_ids_BP), mb.prompt(roll.prompt_mask_BP), mb.completion(comp_BT), mb.completion(mask_BT))
        c_bt, m_bt = a[2], a[3]
        s, dt = _timed(LP.model_head, model, *a, dtype=dtype, temperature=cfg.temperature)
        times["time/student_forward"] += dt
        t, dt = _timed(LP.model_head, teacher, *a, dtype=cfg.score_dtype)
        times["time/teacher_score"] += dt
        r, dt = _timed(LP.model_head, ref, *a, dtype=cfg.score_dtype) if direct else (None, 0.0)
        times["time/ref_score"] += dt
        heads = [s, t] + ([r] if r is not None else [])
        stats = LP.map_chunks(lambda lg, ex: position_stats(lg[0], lg[1], lg[2] if len(lg) > 2 else None, K),
                              heads, [], chunk)
        for k, v in zip(names, stats):
            mb.put(pos_BT[k], v)
        keep_bt = A.topq_position_mask(stats[-1], m_bt, cfg.top_q) if keep_BT is not None else None
        if keep_bt is not None:
            mb.put(keep_BT, keep_bt)
        if keep_old:
            mb.put(old_BT, LP.token_logprobs(s, c_bt, chunk))
        if full:
            _, fs = LP.direct_opd_full_vocab_loss(s, t, r, m_bt, keep_BT=keep_bt, scale=cfg.reward_scale,
                                                  clip=cfg.delta_clip, chunk=chunk)
            for name, h in (("teacher", t), ("ref", r)) + ((("old", s),) if keep_old else ()):
                hidden.setdefault(name, zeros(B, T, h.hidden_BTH.shape[-1]))
                mb.put(hidden[name], h.hidden_BTH)
                if name not in head_w:
                    b = None if h.bias_V is None else h.bias_V.detach().clone()
                    head_w[name] = (h.weight_VH.detach().clone() if name == "old" else h.weight_VH, b)
            V = s.vocab
            mb.put(reward_BT, fs["reward"])
            mb.put(dmean_BT, fs["delta_sum"] / V)
            mm = m_bt.bool()
            n, s1 = n + float(mm.sum()) * V, s1 + fs["delta_sum"][mm].double().sum()
            s2, npos = s2 + fs["delta_sq_sum"][mm].double().sum(), npos + fs["delta_pos"][mm].double().sum()
            continue
        if mode == "sampled":
            ids_btk = c_bt.unsqueeze(-1)
            s_lp = LP.gather_logprobs(s, ids_btk, chunk)
        else:  # the top-K ids and their log-probs in one pass
            ids_btk, s_lp = LP.student_topk(s, K, chunk)
        t_lp = LP.gather_logprobs(t, ids_btk, chunk)
        if not direct:
            adv = A.vanilla_opd_advantage(s_lp, t_lp, scale=cfg.reward_scale)
            delta = adv
        elif mode == "sampled":
            adv = A.direct_opd_sampled(t_lp, LP.gather_logprobs(r, ids_btk, chunk), scale=cfg.reward_scale,
                                       clip=cfg.delta_clip)
            delta = adv
        else:
            adv, _, delta = A.direct_opd_candidates(s_lp, t_lp, LP.gather_logprobs(r, ids_btk, chunk),
                                                    scale=cfg.reward_scale, clip=cfg.delta_clip)
        if keep_bt is not None:
            adv = adv * keep_bt.unsqueeze(-1)
        mb.put(ids_BTK, ids_btk)
        mb.put(adv_BTK, adv)
        if old_BTK is not None:
            mb.put(old_BTK, s_lp)
        mb.put(reward_BT, adv.sum(-1))
        mb.put(dmean_BT, delta.float().mean(-1))
        mom = delta_moments(delta, m_bt)
        n, s1, s2, npos = n + mom[0], s1 + mom[1], s2 + mom[2], npos + mom[3]
    return Signal(ids_BTK, adv_BTK, old_BTK, old_BT, hidden, head_w, keep_BT, reward_BT, dmean_BT, (n, s1, s2, npos),
                  pos_BT, times)


def opd_policy_loss(cfg: OPDConfig, s: LP.Head, sig: Signal, mb: MB.MicroBatch, comp_BT, mask_BT, outcome_B, *,
                    on_policy: bool, clip_low, clip_high, num_tokens, num_seqs, chunk):
    """One micro-batch's candidate PPO surrogate (:func:`shiftkit.losses.candidate_policy_loss`, or
    :func:`shiftkit.logprobs.direct_opd_full_vocab_loss` over every token), with the outcome advantage
    as one more candidate (``grpo_weight``). Returns ``(loss, log p(sampled) [b, t], metrics)``."""
    c_bt, m_bt = mb.completion(comp_BT), mb.completion(mask_BT)
    agg = dict(aggregation=cfg.aggregation, num_tokens=num_tokens, num_seqs=num_seqs)
    if sig.ids_BTK is None:  # full_vocab: the teachers' heads from their stored hidden states
        t, r = (LP.Head(mb.completion(sig.hidden[k]), *sig.head_w[k]) for k in ("teacher", "ref"))
        old = None if on_policy else LP.Head(mb.completion(sig.hidden["old"]), *sig.head_w["old"], s.temperature)
        keep = None if sig.keep_BT is None else mb.completion(sig.keep_BT)
        loss, _ = LP.direct_opd_full_vocab_loss(s, t, r, m_bt, old=old, keep_BT=keep, scale=cfg.reward_scale,
                                                clip=cfg.delta_clip, clip_low=clip_low, clip_high=clip_high,
                                                chunk=chunk, **agg)
        lp_bt = LP.token_logprobs(s, c_bt, chunk)
        pm = {"clip_frac": torch.tensor(0.0)}
        if outcome_B is not None:
            out_bt = (cfg.grpo_weight * mb.rows_of(outcome_B).float())[:, None].expand_as(lp_bt).to(lp_bt.device)
            old_bt = lp_bt.detach() if on_policy else mb.completion(sig.old_lp_BT)
            l2, pm = losses.policy_loss(lp_bt, old_bt, out_bt, m_bt, clip_low=clip_low, clip_high=clip_high, **agg)
            loss = loss + l2
        return loss, lp_bt, pm
    ids_btk = mb.completion(sig.ids_BTK)
    both = LP.gather_logprobs(s, torch.cat([ids_btk, c_bt.unsqueeze(-1)], -1), chunk)  # candidates + sampled
    lp_btk, lp_bt = both[..., :-1], both[..., -1]
    adv = mb.completion(sig.adv_BTK)
    old = lp_btk.detach() if on_policy else mb.completion(sig.old_lp_BTK)
    if outcome_B is not None:
        old_bt = lp_bt.detach() if on_policy else mb.completion(sig.old_lp_BT)
        lp_btk, adv = A.with_outcome_advantage(lp_btk, adv, lp_bt, mb.rows_of(outcome_B), cfg.grpo_weight)
        old = torch.cat([old, old_bt.unsqueeze(-1)], -1)
    loss, pm = losses.candidate_policy_loss(lp_btk, old, adv, m_bt, clip_low=clip_low, clip_high=clip_high, **agg)
    return loss, lp_bt, pm


def _collapse_guard(cfg: OPDConfig, st: kit.RunState, stage: int, step: int, bad_steps: int, eos_rate: float,
                    resp_len: float, first_len: float) -> None:
    """Stop the run after ``guard_patience`` consecutive collapsed steps (:func:`collapsed`)."""
    if cfg.guard_patience and bad_steps >= cfg.guard_patience:
        if st.log:
            st.log.close()
        raise ShiftkitError(
            f"collapse guard: stage {stage} step {step}: EOS rate {eos_rate:.2f} (min {cfg.guard_min_eos_rate}) / "
            f"mean length {resp_len:.1f} (first step {first_len:.1f}) for {bad_steps} steps; the student stopped "
            f"terminating properly. Lower lr, raise kl_coef, or set guard_patience=0; metrics in {st.run.path}")


def _timed(fn, *args, **kw):
    """``(fn(*args, **kw), seconds)``."""
    t = time.time()
    return fn(*args, **kw), time.time() - t
