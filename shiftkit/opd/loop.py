"""Direct-OPD (and the vanilla-OPD baseline): one readable loop.

Per step: draw ``prompts_per_step`` prompts from ``(seed, step)``; the **student** samples
``samples_per_prompt`` completions each (on-policy, per-row seeds); one student forward gives the
candidates (the sampled token, the student's top-K, or the whole vocabulary) and their log-probs;
the post-RL **teacher** and its pre-RL **reference** score the student's own token ids at those
candidates (full forward, exact log-softmax, fp32 by default, same engine and dtype); the reward is
``Delta = log pi_teacher - log pi_ref`` and the advantage ``sg[w * Delta]``, micro-batch by
micro-batch (:func:`shiftkit.advantages.direct_opd_signal`, the signal the TRL trainer uses too); the
loss is the PPO surrogate over candidates (:func:`shiftkit.losses.candidate_policy_loss`, token-mean;
:func:`shiftkit.losses.direct_opd_full_vocab_loss` over the vocabulary) plus ``alpha * k3 KL`` on the sampled
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

from shiftkit import advantages, logprobs, losses, microbatch
from shiftkit import loopkit as kit
from shiftkit.config import check_dependent, check_range, defaults, to_dict
from shiftkit.data import DataKeys, is_arith
from shiftkit.dist import Dist, DistKeys, set_threads
from shiftkit.errors import ShiftkitError
from shiftkit.evaluate import held_out_eval
from shiftkit.inputs import prompt_inputs
from shiftkit.models import check_tokenizer_matches, frozen_copy, load_model_and_tokenizer, prepare_policy
from shiftkit.opd import preflight as pf
from shiftkit.opd.diagnostics import POSITION_STATS, collapsed, opd_diagnostics, position_stats
from shiftkit.prompts import CHAT_TEMPLATE_RULES, PromptKeys
from shiftkit.rewards import RewardKeys
from shiftkit.rl import GRPOConfig, run_grpo
from shiftkit.runs import RunDir, open_run_dir

METHODS = ("direct_opd", "vanilla_opd", "grpo")
KL_MODES = ("adaptive", "fixed", "none")
STAGE_KEYS = {"teacher", "teacher_ref", "steps", "kl_mode", "kl_coef", "kl_eps", "kl_min", "kl_max",
              "reward_mode", "lr"}


@dataclasses.dataclass
class OPDKeys:
    """The Direct-OPD keys: the signal (:func:`shiftkit.advantages.direct_opd_signal`), the KL to the
    student's start and its adaptive controller, and the scorers' precision. Declared once, shared by
    :class:`OPDConfig` (the native loop) and :class:`shiftkit.integrations.trl.OPDArgs` (TRL)."""

    method: str = "direct_opd"  # direct_opd | vanilla_opd | grpo (baselines; grpo: the native loop only)
    reward_mode: str = "student_topk"  # sampled | student_topk | full_vocab
    top_k: int = 16  # student_topk: the student's top-K candidates per position (official: 16)
    reward_scale: float = 1.0  # lambda (official: 1)
    delta_clip: float = 0.0  # clamp Delta to +-delta_clip (official: none)
    top_q: float = 1.0  # keep the reward only at the top-q fraction of positions by teacher/ref JSD (S2D: 0.1)
    kl_mode: str = "adaptive"  # adaptive (official) | fixed | none
    kl_coef: float = 2.5  # alpha_0 (adaptive) or alpha (fixed)
    kl_eps: float = 0.01  # adaptive: alpha *= 1 +- kl_eps by the sign of the weighted mean reward
    kl_min: float = 0.5  # adaptive: the lower clip of alpha
    kl_max: float = 2.5  # adaptive: the upper clip of alpha
    kl_clamp: bool = GRPOConfig.kl_clamp  # clamp the k3 log-ratio to [-20, 20] and the k3 to 10, as verl's low_var_kl
    aggregation: str = GRPOConfig.aggregation  # token_mean | seq_mean
    score_dtype: str = "float32"  # teacher, reference and anchor scoring dtype (anchor at `temperature`)
    allow_tokenizer_mismatch: bool = False  # let student, teacher and reference tokenize differently

    def validate_opd(self, command: str, methods: tuple[str, ...] = METHODS) -> None:
        if self.method not in methods:
            raise ShiftkitError(f"{command}: method must be one of {', '.join(methods)}, got '{self.method}'")
        if self.reward_mode not in advantages.OPD_REWARD_MODES:
            raise ShiftkitError(f"{command}: reward_mode must be one of {', '.join(advantages.OPD_REWARD_MODES)}, "
                                f"got '{self.reward_mode}'")
        if self.kl_mode not in KL_MODES:
            raise ShiftkitError(f"{command}: kl_mode must be one of {', '.join(KL_MODES)}, got '{self.kl_mode}'")
        if self.aggregation not in losses.AGGREGATIONS:
            raise ShiftkitError(f"{command}: aggregation must be token_mean or seq_mean, got '{self.aggregation}'")
        if self.top_k <= 0:
            raise ShiftkitError(f"{command}: top_k must be positive")
        if not 0 < self.top_q <= 1:
            raise ShiftkitError(f"{command}: top_q must be in (0, 1], got {self.top_q}")


@dataclasses.dataclass
class OPDConfig(microbatch.MemoryConfig, DataKeys, PromptKeys, RewardKeys, OPDKeys, DistKeys):
    """``shiftkit opd``: the keys below, plus the shared memory, data, prompt and reward groups and the
    Direct-OPD keys (:class:`OPDKeys`). Defaults shared with GRPO are GRPO's (``GRPOConfig.<key>``)."""

    student: str = ""  # HF dir or hub id: the model trained (and, per stage, its KL anchor)
    teacher: str = ""  # the weak model after RL
    teacher_ref: str = ""  # the same weak model before RL
    stages: list[dict] = dataclasses.field(default_factory=list)  # composition: [{teacher, teacher_ref, steps, ...}]
    out: str = "runs/opd"  # run directory (config.json, metrics.jsonl, samples.jsonl, checkpoints/, final/)
    prompts: str = ""  # alias of data= (a prompt file: JSONL with a prompt column, or .txt with one per line)
    samples_every: int = GRPOConfig.samples_every  # write rollouts with their per-token Delta summary to samples.jsonl every N steps
    samples_n: int = GRPOConfig.samples_n  # rollouts per samples.jsonl dump
    report_to: str = GRPOConfig.report_to  # none | tensorboard | wandb (through accelerate's trackers)
    steps: int = GRPOConfig.steps
    prompts_per_step: int = GRPOConfig.prompts_per_step  # official: 128
    samples_per_prompt: int = 4  # official n = 4
    max_new_tokens: int = GRPOConfig.max_new_tokens  # official: 2048
    temperature: float = GRPOConfig.temperature
    top_p: float = GRPOConfig.top_p
    grpo_weight: float = 0.0  # w: add w * GRPO outcome advantage (needs tasks and samples_per_prompt >= 2)
    lr: float = 1e-6  # official (1.7B students); the toy experiment uses 2e-4
    warmup: int = GRPOConfig.warmup
    schedule: str = GRPOConfig.schedule
    weight_decay: float = GRPOConfig.weight_decay
    grad_clip: float = GRPOConfig.grad_clip
    clip_low: float = GRPOConfig.clip_low  # PPO clip (0 = off: with one epoch the update is REINFORCE, as official)
    clip_high: float = GRPOConfig.clip_high  # 0 = same as clip_low; set alone, it clips the ratio above only
    clip_dual: float = GRPOConfig.clip_dual  # dual-clip PPO on negative advantages (verl's clip_ratio_c, e.g. 3); 0 = off
    ppo_epochs: int = GRPOConfig.ppo_epochs
    determinism_tol: float = 1e-4
    guard_patience: int = 5  # consecutive collapsed steps before stopping (0 = guard off)
    guard_min_eos_rate: float = 0.1
    guard_min_len_frac: float = 0.2  # collapse if mean length < this x the stage's first-step length
    seed: int = GRPOConfig.seed
    eval_every: int = GRPOConfig.eval_every
    eval_n: int = GRPOConfig.eval_n
    save_every: int = GRPOConfig.save_every
    keep_checkpoints: int = GRPOConfig.keep_checkpoints  # checkpoints kept, also after the run finishes: the last N (0 = none, -1 = all)
    threads: int = GRPOConfig.threads
    overwrite: bool = GRPOConfig.overwrite
    progress: bool = GRPOConfig.progress

    def validate(self) -> None:
        self.validate_memory("opd")
        if not self.student:
            raise ShiftkitError("opd needs a student (--student or student=<path or hub id>)")
        self.validate_opd("opd")
        if self.steps <= 0 or self.prompts_per_step <= 0 or self.samples_per_prompt <= 0:
            raise ShiftkitError("opd: steps, prompts_per_step and samples_per_prompt must be positive")
        if self.grpo_weight and self.samples_per_prompt < 2:
            raise ShiftkitError("opd: grpo_weight needs samples_per_prompt >= 2 (the GRPO group)")
        losses.ppo_clip(self.clip_low, self.clip_high, self.clip_dual)  # the ranges (0 = off)
        if self.prompts and (self.data or self.tasks):
            raise ShiftkitError("opd: prompts= is an alias of data=; give one source (data, prompts or tasks)")
        kit.check_report_to(self.report_to)
        with_data(self).check_data("opd")
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
                for k, v in st.items():  # the numbers of a stage obey the same ranges as the top-level keys
                    check_range(type(self), k, v)
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
    **CHAT_TEMPLATE_RULES,
    **kit.SAMPLES_RULES,
    **kit.CHECKPOINT_RULES,
    "kl_eps": (lambda c: c.kl_mode == "adaptive", "with kl_mode=adaptive"),
    "kl_min": (lambda c: c.kl_mode == "adaptive", "with kl_mode=adaptive"),
    "kl_max": (lambda c: c.kl_mode == "adaptive", "with kl_mode=adaptive"),
    "kl_coef": (lambda c: c.kl_mode != "none", "with a KL (kl_mode adaptive|fixed)"),
    "kl_clamp": (lambda c: c.kl_mode != "none", "with a KL (kl_mode adaptive|fixed)"),
    "guard_min_eos_rate": (lambda c: c.guard_patience > 0, "with the collapse guard on (guard_patience > 0)"),
    "guard_min_len_frac": (lambda c: c.guard_patience > 0, "with the collapse guard on (guard_patience > 0)"),
}
_DEFAULTS = defaults(OPDConfig)


def with_data(cfg: OPDConfig) -> OPDConfig:
    """``prompts=FILE`` is ``data=FILE`` (and reads only the file)."""
    return dataclasses.replace(cfg, data=cfg.prompts, prompts="") if cfg.prompts else cfg


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
        teacher, ttok = load_model_and_tokenizer(st.teacher, device=d.frozen_device())  # CPU when FSDP shards it
        named = {"student": (student, stok), "teacher": (teacher, ttok)}
        ref = None
        if st.method == "direct_opd":
            ref, rtok = load_model_and_tokenizer(st.teacher_ref, device=d.frozen_device())
            pf.check_distinct(teacher, ref, st.teacher, st.teacher_ref)
            named["teacher_ref"] = (ref, rtok)
        info["tokenizer_differences"] += pf.check_tokenizers(named, prompts, cfg.allow_tokenizer_mismatch)
        teacher, ref = d.place_frozen(teacher), d.place_frozen(ref)  # FSDP: sharded (frozen_placement)
        scorers = {"teacher": teacher, **({"teacher_ref": ref} if ref is not None else {})}
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
        return {"method": "grpo", **run_grpo(grpo_config(cfg))}
    set_threads(cfg.threads)
    d = Dist(cfg)  # the launcher's strategy and settings (mixed precision -> autocast), before config.json
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
                                                      stage=i, step_offset=offset, last=len(stages) == 1,
                                                      summary_extra={"determinism_gap": info["determinism_gap"]})
        summaries.append(s)
        start_path, offset = s["out"], offset + st["cfg"].steps
    summary = {**summaries[-1], "method": cfg.method, "steps": offset, "train_seconds": time.time() - t0,
               "determinism_gap": info["determinism_gap"], "shift_anatomy": info.get("shift_anatomy", [])}
    if len(stages) > 1:
        summary["stages"] = summaries
        if d.is_main:
            model, tok = load_model_and_tokenizer(start_path)
            summary["out"] = str(top.final)
            top.finish(model, tok, summary)  # the stages keep their own checkpoints
        d.barrier()
    return summary


def _run_stage(cfg: OPDConfig, teacher, ref, start_path: str, run: RunDir, d: Dist, src, *,
               stage: int, step_offset: int, last: bool, summary_extra: dict) -> dict:
    model, tok = load_model_and_tokenizer(start_path, device=d.device)
    model = prepare_policy(model, cfg)  # LoRA adapters, activation checkpointing
    anchor = d.place_frozen(frozen_copy(model, cfg)) if cfg.kl_mode != "none" else None
    model.train()
    ddp_model = d.wrap(model)  # DDP wrapper, or FSDP2: `model` sharded in place (before the optimizer)
    opt = kit.make_optimizer(model, cfg.lr, cfg.weight_decay)
    st = kit.resume(run, model, opt, d, cfg.steps, f"{cfg.method} {run.path.name}", cfg.progress, cfg.report_to)
    alpha = st.extra.get("alpha", cfg.kl_coef if cfg.kl_mode != "none" else 0.0)
    eval_fn = held_out_eval(model, tok, src, cfg.max_new_tokens) if cfg.eval_every and src.rewards else None
    kit.first_eval(st, eval_fn, stage=stage, global_step=step_offset)
    off_policy = kit.needs_old_logprobs(cfg.clip_low, cfg.clip_high, cfg.ppo_epochs, cfg.top_p)
    P, G, seed = cfg.prompts_per_step, cfg.samples_per_prompt, cfg.seed + 7919 * stage
    dtype, chunk = microbatch.autocast_dtype(cfg.autocast), cfg.logit_chunk or None
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
        mbs = microbatch.micro_batches(roll.prompt_mask_BP, mask_BT, cfg.token_budget, d=d,
                                       packed=cfg.packing)  # memory: one micro-batch at a time
        # -- the per-token signal (shiftkit.advantages), micro-batch by micro-batch, no [B, T, V] -----
        sig = opd_signal(cfg, model, teacher, ref, roll, mbs, dtype=dtype, chunk=chunk, keep_old=off_policy,
                         sampled_rows=cfg.samples_n if kit.samples_due(st, step, cfg.samples_every) else 0)
        with torch.no_grad():
            anchor_logp_BT, t_anchor = (_timed(logprobs.score_mb, anchor, *args, mbs, dtype=cfg.score_dtype,
                                               temperature=cfg.temperature, chunk=cfg.logit_chunk)
                                        if anchor is not None else (None, 0.0))
        d.release(teacher, ref, anchor)  # FSDP: free the gathered roots of the sharded frozen models
        rewards_B, res = None, None
        ex_B = [problems[i] for i in mine for _ in range(G)]
        if src.rewards is not None:
            res = src.rewards.score(ex_B, roll.texts, step=step)
            rewards_B = torch.tensor(res.total).nan_to_num(0.0)
        outcome_B = advantages.group_advantages(torch.tensor(res.total), G).to(d.device) if cfg.grpo_weight else None
        wr_mean = float(d.sum((sig.reward_BT * mask_BT).sum()) / n_tok.clamp(min=1))
        if cfg.kl_mode == "adaptive":
            alpha = advantages.adaptive_kl_coef(alpha, wr_mean, cfg.kl_eps, cfg.kl_min, cfg.kl_max)
        # -- update ----------------------------------------------------------------------------------
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        u = opd_update(cfg, model, ddp_model, opt, d, roll, mbs, sig, outcome_B, anchor_logp_BT, alpha,
                       off_policy=off_policy, dtype=dtype, chunk=chunk)
        n_mine = max(float(mask_BT.sum()), 1.0)
        kl_mean, clip_frac = u.pop("kl_sum") / n_mine, u.pop("clip_sum") / n_mine
        # -- log, collapse guard, checkpoint ---------------------------------------------------------
        diag = opd_diagnostics(sig.moments, sig.pos_BT, mask_BT)
        eos_rate, resp_len = float(d.sum(roll.eos_B.sum()) / n_seq), float(n_tok / n_seq)
        row = {"stage": stage, "global_step": step_offset + step + 1, "loss": u.pop("loss"),
               "pg_loss": u.pop("pg_loss"), **diag, "reward/weighted_mean": wr_mean, "kl/alpha": alpha,
               "kl/k3": float(kl_mean), "response_len": resp_len, "eos_rate": eos_rate,
               "clip_frac": float(clip_frac), "lr": opt.param_groups[0]["lr"], **u, "time/sample": t_sample,
               **sig.times, "time/anchor_score": t_anchor, "step_time": time.time() - t0}
        if rewards_B is not None:
            row["reward"] = float(d.sum(rewards_B.sum()) / n_seq)
            row.update({k: v for k, v in res.metrics.items() if k.startswith("rewards/")})
        kit.write_samples(st, step, cfg.samples_every, lambda: kit.samples_rows(
            step, ex_B, roll.texts, {"total": res.total} if res is not None else None, None, cfg.samples_n,
            delta_summary(sig, mask_BT, cfg.samples_n)))
        kit.log_step(st, step, row, cfg.steps, cfg.eval_every, eval_fn, dmean=f"{diag['delta/mean']:.3f}",
                     alpha=f"{alpha:.2f}")
        first_len = resp_len if first_len is None else first_len
        bad_steps = bad_steps + 1 if collapsed(eos_rate, resp_len, first_len, cfg.guard_min_eos_rate,
                                               cfg.guard_min_len_frac) else 0
        _collapse_guard(cfg, st, stage, step, bad_steps, eos_rate, resp_len, first_len)
        kit.checkpoint(st, step, cfg.steps, cfg.save_every, model, tok, opt, extra={"alpha": alpha})
    summary = {"out": str(run.final), "stage": stage, "steps": cfg.steps, "train_seconds": time.time() - st.t_start,
               "final_alpha": alpha, "final_reward": row.get("reward"), **summary_extra}
    return kit.close_run(st, model, tok, summary, row)


def opd_update(cfg: OPDConfig, model, ddp_model, opt, d: Dist, roll, mbs: list, sig: "Signal", outcome_B,
               anchor_logp_BT, alpha: float, *, off_policy: bool, dtype, chunk) -> dict:
    """``ppo_epochs`` passes of the candidate surrogate (+ ``alpha`` k3 KL to the anchor), then the clipped step.

    Rows whose advantage is 0 at every valid position and candidate, with no KL (``alpha = 0`` or no
    anchor) and no outcome advantage, add exactly 0 to the gradient: they get no forward or backward
    (``micro_batches(keep_B=...)``; the losses keep the whole batch's counts). ``full_vocab`` builds its
    advantages in the loss, so every row is kept. No row left: no optimizer step.
    """
    mask_BT, comp_BT = roll.completion_mask_BT, roll.completion_ids_BT
    n_tok, n_seq = d.sum(mask_BT.sum()), cfg.prompts_per_step * cfg.samples_per_prompt
    keep_B = None
    if sig.adv_BTK is not None:  # full_vocab builds its advantages in the loss: every row is kept
        keep_B = microbatch.rows_with_gradient(sig.adv_BTK, mask_BT, other_terms=anchor_logp_BT is not None and alpha > 0)
        keep_B = keep_B | (microbatch.rows_with_gradient(outcome_B) if outcome_B is not None else False)
        mbs = microbatch.micro_batches(roll.prompt_mask_BP, mask_BT, cfg.token_budget, d=d, keep_B=keep_B,
                                       packed=cfg.packing)
    clip = losses.ppo_clip(cfg.clip_low, cfg.clip_high, cfg.clip_dual)
    t5 = time.time()
    for epoch in range(cfg.ppo_epochs):
        opt.zero_grad(set_to_none=True)
        loss_sum, pg_loss, kl_sum, clip_sum = torch.zeros(()), 0.0, 0.0, 0.0
        for mb in microbatch.accumulating(ddp_model, mbs):  # no_sync until the last micro-batch
            m_bt = mb.completion(mask_BT)
            s = logprobs.model_head(ddp_model, mb.prompt(roll.prompt_ids_BP), mb.prompt(roll.prompt_mask_BP),
                                    mb.completion(comp_BT), m_bt, dtype=dtype, temperature=cfg.temperature,
                                    packed=mb.packed)
            loss, lp_bt, pm = opd_policy_loss(cfg, s, sig, mb, comp_BT, mask_BT, outcome_B, on_policy=not off_policy,
                                              **clip, num_tokens=n_tok, num_seqs=n_seq, chunk=chunk)
            n = float(m_bt.sum()) * mb.scale
            pg_loss += float(loss.detach()) * mb.scale
            clip_sum += float(pm["clip_frac"]) * n
            if anchor_logp_BT is not None and alpha > 0:
                kl_loss, kl_mean = losses.kl_penalty(lp_bt, mb.completion(anchor_logp_BT), m_bt, alpha,
                                                     cfg.aggregation, n_tok, n_seq, clamp=cfg.kl_clamp)
                loss = loss + kl_loss
                kl_sum += float(kl_mean) * n
            loss = loss * mb.scale  # 0 for a filler micro-batch that only keeps ranks in step
            (loss * d.world).backward()  # global-count means: summed over micro-batches and ranks
            loss_sum = loss_sum + loss.detach().float().cpu()
        gnorm = kit.clip_and_step(model, opt, cfg.grad_clip, skip=not mbs)
    return {"loss": float(loss_sum), "pg_loss": float(pg_loss), "kl_sum": kl_sum, "clip_sum": clip_sum,
            "grad_norm": gnorm, "micro_batches": len(mbs), "update_rows": len(mask_BT) if keep_B is None else
            int(keep_B.sum()), "time/update": time.time() - t5}


def delta_summary(sig: "Signal", mask_BT: torch.Tensor, n: int) -> dict[str, list]:
    """Per rollout (the first ``n``), for ``samples.jsonl``: ``delta``, the sampled token's Delta at each
    completion position (the reward that token gets in ``reward_mode=sampled``; vanilla OPD: its
    advantage), 4 decimals, with its mean / min / max over the completion; and, when the signal has other
    candidates (``student_topk``: the student's top-K; ``full_vocab``: the vocabulary),
    ``delta_candidates``: the candidates' Delta averaged at each position. Both shaped as the signal is
    (``reward_scale``, ``delta_clip``)."""
    both = sig.delta_sampled_BT is not sig.delta_mean_BT
    out: dict[str, list] = {"delta": [], "delta/mean": [], "delta/min": [], "delta/max": [],
                            **({"delta_candidates": []} if both else {})}
    for b in range(min(n, mask_BT.shape[0])):
        m = mask_BT[b].bool()
        per_tok = sig.delta_sampled_BT[b].float()[m]
        out["delta"].append([round(float(x), 4) for x in per_tok])
        has = per_tok.numel() > 0
        out["delta/mean"].append(float(per_tok.mean()) if has else None)
        out["delta/min"].append(float(per_tok.min()) if has else None)
        out["delta/max"].append(float(per_tok.max()) if has else None)
        if both:
            out["delta_candidates"].append([round(float(x), 4) for x in sig.delta_mean_BT[b].float()[m]])
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
    delta_sampled_BT: torch.Tensor | None = None  # the sampled token's Delta in the first sampled_rows rows (samples.jsonl)


@torch.no_grad()
def opd_signal(cfg: OPDConfig, model, teacher, ref, roll, mbs: list, *, dtype, chunk, keep_old: bool,
               sampled_rows: int = 0) -> Signal:
    """One step's signal, micro-batch by micro-batch: the three models' chunked heads
    (:mod:`shiftkit.logprobs`), the logged position statistics (:mod:`shiftkit.opd.diagnostics`) and the
    Direct-OPD (or vanilla-OPD) signal :func:`shiftkit.advantages.direct_opd_signal`, written back into
    full-batch tensors (the candidates' axis ``K``, never ``V``). ``sampled_rows`` > 0: also the sampled
    token's Delta in the first that many rows (:func:`sampled_delta`; the candidates' mean when the
    sampled token is the only candidate)."""
    direct = cfg.method == "direct_opd"
    comp_BT, mask_BT = roll.completion_ids_BT, roll.completion_mask_BT
    out: dict[str, torch.Tensor] = {}  # full-batch [B, T, ...] tensors, allocated by the first micro-batch

    def put(name: str, mb: microbatch.MicroBatch, x_bt: torch.Tensor, dt=torch.float32) -> None:
        if name not in out:
            out[name] = torch.zeros(*comp_BT.shape, *x_bt.shape[2:], dtype=dt, device=comp_BT.device)
        mb.put(out[name], x_bt)

    names = POSITION_STATS if direct else POSITION_STATS[:4]
    moments = [torch.zeros((), dtype=torch.float64)] * 4
    head_w: dict = {}
    times = dict.fromkeys(("time/student_forward", "time/teacher_score", "time/ref_score"), 0.0)
    for mb in mbs:
        a = (mb.prompt(roll.prompt_ids_BP), mb.prompt(roll.prompt_mask_BP), mb.completion(comp_BT), mb.completion(mask_BT))
        s, dt = _timed(logprobs.model_head, model, *a, dtype=dtype, temperature=cfg.temperature, packed=mb.packed)
        times["time/student_forward"] += dt
        t, dt = _timed(logprobs.model_head, teacher, *a, dtype=cfg.score_dtype, packed=mb.packed)
        times["time/teacher_score"] += dt
        r, dt = _timed(logprobs.model_head, ref, *a, dtype=cfg.score_dtype, packed=mb.packed) if direct else (None, 0.0)
        times["time/ref_score"] += dt
        if mb.scale == 0:
            continue  # a filler: its forwards only keep FSDP-sharded models in step across ranks
        stats = logprobs.map_chunks(lambda lg, ex: position_stats(lg[0], lg[1], lg[2] if len(lg) > 2 else None, cfg.top_k),
                              [h for h in (s, t, r) if h is not None], [], chunk)
        for k, v in zip(names, stats):
            put(k, mb, v)
        sig = advantages.direct_opd_signal(s, t, r, a[2], a[3], mode=cfg.reward_mode if direct else "sampled",
                                           k=cfg.top_k, scale=cfg.reward_scale, clip=cfg.delta_clip, top_q=cfg.top_q,
                                           jsd_bt=stats[-1] if direct else None, chunk=chunk)
        put("reward", mb, sig.reward_bt)
        put("delta_mean", mb, sig.delta_mean_bt)
        if sampled_rows and direct and cfg.reward_mode != "sampled":
            out.setdefault("delta_sampled", torch.zeros(comp_BT.shape, device=comp_BT.device))
            sampled_delta(cfg, t, r, a[2], mb, sampled_rows, out["delta_sampled"], chunk)
        moments = [m + x for m, x in zip(moments, sig.moments)]
        if sig.keep_bt is not None:
            put("keep", mb, sig.keep_bt, torch.bool)
        if keep_old:
            put("old_lp", mb, logprobs.token_logprobs(s, a[2], chunk))
        if sig.ids_btk is not None:
            put("ids", mb, sig.ids_btk, torch.long)
            put("adv", mb, sig.adv_btk)
            if keep_old:
                put("old_lp_k", mb, sig.student_lp_btk)
            continue
        for name, h in (("teacher", t), ("ref", r)) + ((("old", s),) if keep_old else ()):  # full_vocab: the loss
            put(f"hidden/{name}", mb, h.hidden_BTH)  # rebuilds the heads from the last hidden states
            head_w.setdefault(name, (h.weight_VH.detach().clone() if name == "old" else h.weight_VH,
                                     None if h.bias_V is None else h.bias_V.detach().clone()))
    return Signal(out.get("ids"), out.get("adv"), out.get("old_lp_k"), out.get("old_lp"),
                  {k[7:]: v for k, v in out.items() if k.startswith("hidden/")}, head_w, out.get("keep"),
                  out["reward"], out["delta_mean"], tuple(moments), {k: out[k] for k in names}, times,
                  delta_sampled_BT=out.get("delta_sampled", out["delta_mean"] if sampled_rows else None))


def sampled_delta(cfg: OPDConfig, t: logprobs.Head, r: logprobs.Head, ids_bt: torch.Tensor, mb: microbatch.MicroBatch,
                  n: int, dst_BT: torch.Tensor, chunk) -> None:
    """The shaped Delta of each sampled token (:func:`shiftkit.advantages.direct_opd_sampled`) in this
    micro-batch's rows among the batch's first ``n``, written into ``dst_BT`` (only those rows are scored)."""
    sel = mb.rows < n
    if not bool(sel.any()):
        return
    sub = lambda h: logprobs.Head(h.hidden_BTH[sel.to(h.hidden_BTH.device)], h.weight_VH, h.bias_V, h.temperature)  # noqa: E731
    ids = ids_bt[sel.to(ids_bt.device)]
    d_bt = advantages.direct_opd_sampled(logprobs.token_logprobs(sub(t), ids, chunk),
                                         logprobs.token_logprobs(sub(r), ids, chunk),
                                         scale=cfg.reward_scale, clip=cfg.delta_clip)
    dst_BT[mb.rows[sel].to(dst_BT.device), : mb.t_stop] = d_bt.to(dst_BT.dtype)


def opd_policy_loss(cfg: OPDConfig, s: logprobs.Head, sig: Signal, mb: microbatch.MicroBatch, comp_BT, mask_BT, outcome_B, *,
                    on_policy: bool, clip_low, clip_high, clip_dual=None, num_tokens, num_seqs, chunk):
    """One micro-batch's candidate PPO surrogate (:func:`shiftkit.losses.candidate_policy_loss`, or
    :func:`shiftkit.losses.direct_opd_full_vocab_loss` over every token), with the outcome advantage
    as one more candidate (``grpo_weight``). Returns ``(loss, log p(sampled) [b, t], metrics)``."""
    c_bt, m_bt = mb.completion(comp_BT), mb.completion(mask_BT)
    agg = dict(aggregation=cfg.aggregation, num_tokens=num_tokens, num_seqs=num_seqs)
    if sig.ids_BTK is None:  # full_vocab: the teachers' heads from their stored hidden states
        t, r = (logprobs.Head(mb.completion(sig.hidden[k]), *sig.head_w[k]) for k in ("teacher", "ref"))
        old = None if on_policy else logprobs.Head(mb.completion(sig.hidden["old"]), *sig.head_w["old"], s.temperature)
        keep = None if sig.keep_BT is None else mb.completion(sig.keep_BT)
        loss, _ = losses.direct_opd_full_vocab_loss(s, t, r, m_bt, old=old, keep_BT=keep, scale=cfg.reward_scale,
                                                    clip=cfg.delta_clip, clip_low=clip_low, clip_high=clip_high,
                                                    clip_dual=clip_dual, chunk=chunk, **agg)
        lp_bt = logprobs.token_logprobs(s, c_bt, chunk)
        pm = {"clip_frac": torch.tensor(0.0)}
        if outcome_B is not None:
            out_bt = (cfg.grpo_weight * mb.rows_of(outcome_B).float())[:, None].expand_as(lp_bt).to(lp_bt.device)
            old_bt = lp_bt.detach() if on_policy else mb.completion(sig.old_lp_BT)
            l2, pm = losses.policy_loss(lp_bt, old_bt, out_bt, m_bt, clip_low=clip_low, clip_high=clip_high,
                                        clip_dual=clip_dual, **agg)
            loss = loss + l2
        return loss, lp_bt, pm
    ids_btk = mb.completion(sig.ids_BTK)
    both = logprobs.gather_logprobs(s, torch.cat([ids_btk, c_bt.unsqueeze(-1)], -1), chunk)  # candidates + sampled
    lp_btk, lp_bt = both[..., :-1], both[..., -1]
    adv = mb.completion(sig.adv_BTK)
    old = lp_btk.detach() if on_policy else mb.completion(sig.old_lp_BTK)
    if outcome_B is not None:
        old_bt = lp_bt.detach() if on_policy else mb.completion(sig.old_lp_BT)
        lp_btk, adv = advantages.with_outcome_advantage(lp_btk, adv, lp_bt, mb.rows_of(outcome_B), cfg.grpo_weight)
        old = torch.cat([old, old_bt.unsqueeze(-1)], -1)
    loss, pm = losses.candidate_policy_loss(lp_btk, old, adv, m_bt, clip_low=clip_low, clip_high=clip_high,
                                            clip_dual=clip_dual, **agg)
    return loss, lp_bt, pm


def _collapse_guard(cfg: OPDConfig, st: kit.RunState, stage: int, step: int, bad_steps: int, eos_rate: float,
                    resp_len: float, first_len: float) -> None:
    """Stop the run after ``guard_patience`` consecutive collapsed steps (:func:`collapsed`)."""
    if cfg.guard_patience and bad_steps >= cfg.guard_patience:
        if st.log:
            st.log.close()
        raise ShiftkitError(
            f"collapse guard: stage {stage} step {step + 1}: EOS rate {eos_rate:.2f} (min {cfg.guard_min_eos_rate}) / "
            f"mean length {resp_len:.1f} (first step {first_len:.1f}) for {bad_steps} steps; the student stopped "
            f"terminating properly. Lower lr, raise kl_coef, or set guard_patience=0; metrics in {st.run.path}")


def _timed(fn, *args, **kw):
    """``(fn(*args, **kw), seconds)``."""
    t = time.time()
    return fn(*args, **kw), time.time() - t
