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

import contextlib
import copy
import dataclasses
import sys
import time
from pathlib import Path

import torch

from shiftkit import advantages as A
from shiftkit import losses
from shiftkit import loopkit as kit
from shiftkit.config import to_dict
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.opd.diagnostics import collapsed, opd_diagnostics
from shiftkit.rl import GRPOConfig
from shiftkit.runs import RunDir, open_run_dir
from shiftkit.sampling import forward_logits, score, token_logprobs

METHODS = ("direct_opd", "vanilla_opd", "grpo")
KL_MODES = ("adaptive", "fixed", "none")
STAGE_KEYS = {"teacher", "teacher_ref", "steps", "kl_mode", "kl_coef", "kl_eps", "kl_min", "kl_max",
              "reward_mode", "lr"}


@dataclasses.dataclass
class OPDConfig:
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
               "determinism_gap": info["determinism_gap"]}
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
    anchor = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_mode != "none" else None
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
    P, G, K, seed = cfg.prompts_per_step, cfg.samples_per_prompt, cfg.top_k, cfg.seed + 7919 * stage
    direct = cfg.method == "direct_opd"
    row, bad_steps, first_len = {}, 0, None
    for step in range(st.start, cfg.steps):
        t0 = time.time()
        problems = src.ds.draw(seed, step, P)
        mine, roll = kit.rollout(model, tok, src.prompts_for(problems), G, seed, step,
                                 d, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
        t_sample = time.time() - t0
        mask_BT, comp_BT = roll.completion_mask_BT, roll.completion_ids_BT
        args = (roll.prompt_ids_BP, roll.prompt_mask_BP, comp_BT, mask_BT)
        n_tok, n_seq = d.sum(mask_BT.sum()), P * G
        # -- student forward (on-policy: with grad, reused by the update), candidates, scorers ----
        t1 = time.time()
        with torch.no_grad() if off_policy else contextlib.nullcontext():
            s_logits_BTV = forward_logits(model if off_policy else ddp_model, *args) / cfg.temperature
        s_det_BTV = s_logits_BTV.detach()
        ids_BTK = A.opd_candidates(cfg.reward_mode if direct else "sampled", s_det_BTV, comp_BT, K)
        t_student = time.time() - t1
        with torch.no_grad():
            t_logits_BTV, t_teacher = _timed(forward_logits, teacher, *args, dtype=cfg.score_dtype)
            r_logits_BTV, t_ref = _timed(forward_logits, ref, *args, dtype=cfg.score_dtype) if direct else (None, 0.0)
            # the anchor at the sampling temperature, like the student's log-probs it is compared with
            # (verl scores its ref at rollout.temperature); teacher and reference stay at 1 (official)
            anchor_logp_BT, t_anchor = (_timed(score, anchor, *args, dtype=cfg.score_dtype, temperature=cfg.temperature)
                                        if anchor is not None else (None, 0.0))
        # -- per-token advantage over candidates (shiftkit.advantages) ------------------------------
        if direct:
            adv_BTK, delta_BTK, jsd_BT = A.direct_opd(s_det_BTV, t_logits_BTV, r_logits_BTV, ids_BTK, mask_BT,
                                                      mode=cfg.reward_mode, scale=cfg.reward_scale,
                                                      clip=cfg.delta_clip, top_q=cfg.top_q)
        else:
            adv_BTK = A.vanilla_opd_advantage(losses.gather_logprobs(s_det_BTV, ids_BTK),
                                              losses.gather_logprobs(t_logits_BTV, ids_BTK), scale=cfg.reward_scale)
            delta_BTK, jsd_BT = adv_BTK, None
        rewards_B, res = None, None
        ex_B = [problems[i] for i in mine for _ in range(G)]
        if src.rewards is not None:
            res = src.rewards.score(ex_B, roll.texts, step=step)
            rewards_B = torch.tensor(res.total).nan_to_num(0.0)
        outcome_B = A.group_advantages(rewards_B, G) * torch.tensor(res.scorable) if cfg.grpo_weight else None
        wr_mean = float(d.sum(A.weighted_reward_mean(adv_BTK, mask_BT) * mask_BT.sum()) / n_tok.clamp(min=1))
        if cfg.kl_mode == "adaptive":
            alpha = A.adaptive_kl_coef(alpha, wr_mean, cfg.kl_eps, cfg.kl_min, cfg.kl_max)
        mix = (outcome_B, cfg.grpo_weight)  # with an outcome reward: the sampled token is one more candidate
        old_lp_BTK, full_adv_BTK, _ = _candidates(s_det_BTV, ids_BTK, comp_BT, adv_BTK, *mix)
        # -- update ----------------------------------------------------------------------------------
        t5 = time.time()
        kit.set_lr(opt, kit.lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        for epoch in range(cfg.ppo_epochs):
            logits_BTV = s_logits_BTV if not off_policy else forward_logits(ddp_model, *args) / cfg.temperature
            lp_BTK, _, lp_BT = _candidates(logits_BTV, ids_BTK, comp_BT, adv_BTK, *mix)
            loss, pm = losses.candidate_policy_loss(lp_BTK, old_lp_BTK if off_policy else lp_BTK.detach(), full_adv_BTK,
                                                    mask_BT, clip_low=clip_low, clip_high=clip_high,
                                                    aggregation=cfg.aggregation, num_tokens=n_tok, num_seqs=n_seq)
            pg_loss, kl_mean = loss.detach(), torch.tensor(0.0)
            if anchor_logp_BT is not None and alpha > 0:
                kl_loss, kl_mean = losses.kl_penalty(lp_BT, anchor_logp_BT, mask_BT, alpha, cfg.aggregation,
                                                     n_tok, n_seq, clamp=cfg.kl_clamp)
                loss = loss + kl_loss
            gnorm = kit.optimizer_step(loss, model, opt, d, cfg.grad_clip)
        t_update = time.time() - t5
        # -- log, collapse guard, checkpoint ---------------------------------------------------------
        diag = opd_diagnostics(delta_BTK, mask_BT, s_det_BTV, t_logits_BTV, r_logits_BTV, jsd_BT, K)
        eos_rate, resp_len = float(d.sum(roll.eos_B.sum()) / n_seq), float(n_tok / n_seq)
        row = {"step": step, "stage": stage, "global_step": step_offset + step, "loss": float(loss.detach()),
               "pg_loss": float(pg_loss), **diag, "reward/weighted_mean": wr_mean, "kl/alpha": alpha,
               "kl/k3": float(kl_mean), "response_len": resp_len, "eos_rate": eos_rate,
               "clip_frac": float(pm["clip_frac"]), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "time/sample": t_sample, "time/student_forward": t_student, "time/teacher_score": t_teacher,
               "time/ref_score": t_ref, "time/anchor_score": t_anchor, "time/update": t_update,
               "step_time": time.time() - t0}
        if rewards_B is not None:
            row["reward"] = float(d.sum(rewards_B.sum()) / n_seq)
            row.update({k: v for k, v in res.metrics.items() if k.startswith("rewards/")})
        kit.write_samples(st, step, cfg.samples_every, lambda: samples_rows(
            step, ex_B, roll.texts, {"total": res.total} if res is not None else None, None, cfg.samples_n,
            delta_summary(delta_BTK, mask_BT, cfg.samples_n)))
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


def delta_summary(delta_BTK: torch.Tensor, mask_BT: torch.Tensor, n: int) -> dict[str, list]:
    """Per rollout (the first ``n``): the per-token Delta (mean over candidates, 4 decimals) and its
    mean / min / max over the completion, for ``samples.jsonl``."""
    out: dict[str, list] = {"delta": [], "delta/mean": [], "delta/min": [], "delta/max": []}
    for b in range(min(n, delta_BTK.shape[0])):
        m = mask_BT[b].bool()
        per_tok = delta_BTK[b].float().mean(-1)[m]
        out["delta"].append([round(float(x), 4) for x in per_tok])
        has = per_tok.numel() > 0
        out["delta/mean"].append(float(per_tok.mean()) if has else None)
        out["delta/min"].append(float(per_tok.min()) if has else None)
        out["delta/max"].append(float(per_tok.max()) if has else None)
    return out


def _candidates(logits_BTV, ids_BTK, comp_BT, adv_BTK, outcome_B, weight: float):
    """``(logp_BTK, adv_BTK, logp_BT)``: the candidates' log-probs and advantages, plus, with an outcome
    reward (``outcome_B``), the sampled token as one more candidate with advantage ``weight * A_outcome``;
    and the sampled token's log-prob (for the KL)."""
    lp_BTK, lp_BT = losses.gather_logprobs(logits_BTV, ids_BTK), token_logprobs(logits_BTV, comp_BT)
    if outcome_B is None:
        return lp_BTK, adv_BTK, lp_BT
    return (*A.with_outcome_advantage(lp_BTK, adv_BTK, lp_BT, outcome_B, weight), lp_BT)


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
