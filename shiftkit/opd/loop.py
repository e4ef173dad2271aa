"""Direct-OPD (and the vanilla-OPD baseline): one readable loop.

Per step: draw ``prompts_per_step`` prompts from ``(seed, step)``; the **student** samples
``samples_per_prompt`` completions each (on-policy, per-row seeds); one student forward gives the
candidates (the sampled token, the student's top-K, or the whole vocabulary) and their log-probs;
the post-RL **teacher** and its pre-RL **reference** score the student's own token ids at those
candidates (full forward, exact log-softmax, fp32 by default, same engine and dtype); the reward is
``Delta = log pi_teacher - log pi_ref`` and the advantage ``sg[w * Delta]``
(:func:`shiftkit.losses.direct_opd_candidates`); the loss is the PPO surrogate over candidates
(:func:`shiftkit.losses.candidate_policy_loss`, token-mean) plus ``alpha * k3 KL`` on the sampled
token to the student's policy at the start of the stage. ``alpha`` follows the official sign-based
controller, updated from this batch's weighted mean reward before the update (as verl does).

``method=vanilla_opd`` uses ``A = -(log pi_student - log pi_teacher)`` at the sampled token instead.
``stages`` runs a sequence of (teacher, reference, steps, KL) transfers, each re-anchoring its KL
to the checkpoint it starts from and writing its own checkpoint (``<out>/stage<i>/final``).
Under ``accelerate launch`` each rank takes a strided share of the prompts; losses use global
token counts and the KL controller a global reward mean, so ranks stay identical.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import time
from pathlib import Path

import torch

from shiftkit import losses
from shiftkit.config import to_dict
from shiftkit.dist import Dist, unwrap
from shiftkit.errors import ShiftkitError
from shiftkit.runs import RunDir
from shiftkit.sampling import forward_logits, sample, score, token_logprobs
from shiftkit.train_common import grad_norm_clip, lr_at, make_optimizer, set_lr, set_threads

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
    out: str = "runs/opd"
    tasks: list[str] = dataclasses.field(default_factory=lambda: ["add", "mul"])
    prompts: str = ""  # optional prompt file (JSONL with "prompt", or one prompt per line) instead of tasks
    steps: int = 60
    prompts_per_step: int = 16  # official: 128
    samples_per_prompt: int = 4  # official n = 4
    max_new_tokens: int = 48  # official: 2048
    temperature: float = 1.0
    top_p: float = 1.0
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
    kl_clamp: bool = True  # clamp the k3 log-ratio to [-20, 20] and the k3 to 10, as verl's low_var_kl
    lr: float = 1e-6  # official (1.7B students); the toy experiment uses 2e-4
    warmup: int = 0
    schedule: str = "constant"
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    aggregation: str = "token_mean"
    clip_low: float = 0.0  # PPO clip (0 = off: with one epoch the update is REINFORCE, as official)
    clip_high: float = 0.0  # 0 = same as clip_low; set alone, it clips the ratio above only
    ppo_epochs: int = 1
    score_dtype: str = "float32"  # teacher, reference and anchor scoring dtype (anchor at `temperature`)
    allow_tokenizer_mismatch: bool = False
    determinism_tol: float = 1e-4
    guard_patience: int = 5  # consecutive collapsed steps before stopping (0 = guard off)
    guard_min_eos_rate: float = 0.1
    guard_min_len_frac: float = 0.2  # collapse if mean length < this x the stage's first-step length
    seed: int = 0
    eval_every: int = 20
    eval_n: int = 100
    save_every: int = 0
    threads: int = 0
    overwrite: bool = False
    progress: bool = True

    def validate(self) -> None:
        if not self.student:
            raise ShiftkitError("opd needs a student (--student or student=<path or hub id>)")
        if self.method not in METHODS:
            raise ShiftkitError(f"opd: method must be one of {', '.join(METHODS)}, got '{self.method}'")
        if self.reward_mode not in losses.OPD_REWARD_MODES:
            raise ShiftkitError(f"opd: reward_mode must be one of {', '.join(losses.OPD_REWARD_MODES)}, "
                                f"got '{self.reward_mode}'")
        if self.kl_mode not in KL_MODES:
            raise ShiftkitError(f"opd: kl_mode must be one of {', '.join(KL_MODES)}, got '{self.kl_mode}'")
        if self.steps <= 0 or self.prompts_per_step <= 0 or self.samples_per_prompt <= 0 or self.top_k <= 0:
            raise ShiftkitError("opd: steps, prompts_per_step, samples_per_prompt and top_k must be positive")
        if not 0 < self.top_q <= 1:
            raise ShiftkitError(f"opd: top_q must be in (0, 1], got {self.top_q}")
        if self.aggregation not in losses.AGGREGATIONS:
            raise ShiftkitError(f"opd: aggregation must be token_mean or seq_mean, got '{self.aggregation}'")
        if self.grpo_weight and (self.samples_per_prompt < 2 or self.prompts):
            raise ShiftkitError("opd: grpo_weight needs task prompts (no prompts file) and samples_per_prompt >= 2")
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


def row_seed(seed: int, step: int, prompt_idx: int, sample_idx: int) -> int:
    return (seed * 1_000_003 + step * 10_007 + prompt_idx * 101 + sample_idx) % (2**62)


def read_prompt_file(path: str) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise ShiftkitError(f"prompt file not found: {p}")
    out = []
    for i, line in enumerate(p.read_text().splitlines()):
        if not line.strip():
            continue
        if p.suffix == ".jsonl":
            try:
                out.append(json.loads(line)["prompt"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ShiftkitError(f"{p}:{i + 1}: expected a JSON object with a \"prompt\" key") from None
        else:
            out.append(line)
    return out


class PromptSource:
    """Training prompts: task problems (with a reward) or a fixed prompt list (no reward)."""

    def __init__(self, cfg: OPDConfig):
        from shiftkit.tasks import Mixture

        self.mixture = Mixture(cfg.tasks) if cfg.tasks else None
        self.fixed = read_prompt_file(cfg.prompts) if cfg.prompts else None
        if self.fixed is not None and not self.fixed:
            raise ShiftkitError(f"prompt file {cfg.prompts} holds no prompts")
        if self.fixed is None and self.mixture is None:
            raise ShiftkitError("opd: the prompt set is empty (give tasks=... or prompts=<file>)")

    def draw(self, seed: int, step: int, n: int) -> list:
        rng = random.Random(f"rl:{seed}:{step}")  # same draws as the GRPO loop
        if self.fixed is not None:
            return [rng.choice(self.fixed) for _ in range(n)]
        return [self.mixture.sample(rng, "train") for _ in range(n)]

    def preview(self, n: int = 16) -> list[str]:
        return [p if isinstance(p, str) else p.prompt for p in self.draw(0, 0, n)]


def grpo_config(cfg: OPDConfig):
    """The step- and rollout-matched GRPO baseline on the student."""
    from shiftkit.rl import GRPOConfig

    return GRPOConfig(model=cfg.student, out=cfg.out, tasks=list(cfg.tasks), steps=cfg.steps,
                      prompts_per_step=cfg.prompts_per_step, group_size=cfg.samples_per_prompt,
                      max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p, lr=cfg.lr,
                      warmup=cfg.warmup, schedule=cfg.schedule, weight_decay=cfg.weight_decay,
                      grad_clip=cfg.grad_clip, aggregation=cfg.aggregation, clip_low=cfg.clip_low,
                      clip_high=cfg.clip_high, ppo_epochs=cfg.ppo_epochs,
                      kl_coef=cfg.kl_coef if cfg.kl_mode == "fixed" else 0.0, kl_clamp=cfg.kl_clamp, seed=cfg.seed,
                      eval_every=cfg.eval_every, eval_n=cfg.eval_n, save_every=cfg.save_every, threads=cfg.threads,
                      overwrite=cfg.overwrite, progress=cfg.progress)


def preflight(cfg: OPDConfig, d: Dist, src: PromptSource) -> tuple[list[dict], dict]:
    """Load every model and check them before anything is written. Returns per-stage scorers + info."""
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.opd import preflight as pf

    student, stok = load_model_and_tokenizer(cfg.student, device=d.device)
    prompts = src.preview()
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
    return stages, info


def run_opd(cfg: OPDConfig) -> dict:
    """Run Direct-OPD / vanilla OPD (one stage or a composition) or the GRPO baseline."""
    if cfg.method == "grpo":
        from shiftkit.rl import run_grpo

        return {"method": "grpo", **run_grpo(grpo_config(cfg))}
    set_threads(cfg.threads)
    d = Dist()
    src = PromptSource(cfg)
    stages, info = preflight(cfg, d, src)  # nothing is written before this passes
    top = RunDir(cfg.out, to_dict(cfg), overwrite=cfg.overwrite)
    if top.done:
        return top.summary()
    start_path, t0, summaries, offset = cfg.student, time.time(), [], 0
    for i, st in enumerate(stages):
        run = top if len(stages) == 1 else RunDir(Path(cfg.out) / f"stage{i}", to_dict(st["cfg"]),
                                                    overwrite=cfg.overwrite)
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


def _run_stage(cfg: OPDConfig, teacher, ref, start_path: str, run: RunDir, d: Dist, src: PromptSource, *,
               stage: int, step_offset: int, last: bool) -> dict:
    from shiftkit.evaluate import evaluate_model
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.tasks import eval_set

    model, tok = load_model_and_tokenizer(start_path, device=d.device)
    anchor = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_mode != "none" else None
    model.train()
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    alpha = cfg.kl_coef if cfg.kl_mode != "none" else 0.0
    start = 0
    if (ck := run.latest_checkpoint()) is not None:
        start, extra = run.load_trainer_state(ck, model, opt)
        alpha = extra.get("alpha", alpha)
    ddp_model = d.wrap(model)
    log = run.metrics_writer(start) if d.is_main else None
    evals = eval_set(cfg.tasks, cfg.eval_n) if cfg.eval_every and cfg.tasks else []
    mixture = src.mixture
    clip_low = cfg.clip_low or None
    clip_high = (cfg.clip_high or cfg.clip_low) or None
    off_policy = clip_low is not None or cfg.ppo_epochs > 1
    P, G, K = cfg.prompts_per_step, cfg.samples_per_prompt, cfg.top_k
    direct = cfg.method == "direct_opd"
    bar = None
    if cfg.progress and d.is_main:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=start, desc=f"{cfg.method} {run.path.name}", leave=False)

    def do_eval(step: int) -> dict:
        ev = evaluate_model(model, tok, evals, mixture.reward, max_new_tokens=cfg.max_new_tokens)
        return {"step": step, "stage": stage, "global_step": step_offset + step,
                **{f"eval/{k}": v for k, v in ev.items() if k != "per_problem"}}

    first_eval = None
    if evals and start == 0 and d.is_main:
        first_eval = do_eval(0)
        log.write(first_eval)
    t_train, row, bad_steps, first_len = time.time(), {}, 0, None
    for step in range(start, cfg.steps):
        t0 = time.time()
        problems = src.draw(cfg.seed + 7919 * stage, step, P)
        mine = d.shard(list(range(P)))
        prompts = [problems[i] if isinstance(problems[i], str) else problems[i].prompt for i in mine for _ in range(G)]
        seeds = [row_seed(cfg.seed + 7919 * stage, step, i, j) for i in mine for j in range(G)]
        roll = sample(model, tok, prompts, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                      top_p=cfg.top_p, row_seeds=seeds)
        t_sample = time.time() - t0
        mask_BT, comp_BT = roll.completion_mask_BT, roll.completion_ids_BT
        args = (roll.prompt_ids_BP, roll.prompt_mask_BP, comp_BT, mask_BT)
        n_tok, n_seq = d.sum(mask_BT.sum()), P * G
        # -- student forward: candidates (and, off-policy, their old log-probs) --------------------
        t1 = time.time()
        if off_policy:
            with torch.no_grad():
                s_logits_BTV = forward_logits(model, *args) / cfg.temperature
        else:  # on-policy: this forward (with grad) is also the one the update uses
            s_logits_BTV = forward_logits(ddp_model, *args) / cfg.temperature
        s_det_BTV = s_logits_BTV.detach()
        if not direct or cfg.reward_mode == "sampled":
            ids_BTK = comp_BT.unsqueeze(-1)
        elif cfg.reward_mode == "student_topk":
            ids_BTK = losses.student_topk(s_det_BTV, K)[0]
        else:  # full_vocab
            ids_BTK = torch.arange(s_det_BTV.shape[-1]).expand(*comp_BT.shape, -1)
        t_student = time.time() - t1
        # -- teacher and reference score the student's own ids (fp32, exact log-softmax) -----------
        with torch.no_grad():
            t2 = time.time()
            t_logits_BTV = forward_logits(teacher, *args, dtype=cfg.score_dtype)
            t_teacher = time.time() - t2
            t3 = time.time()
            r_logits_BTV = forward_logits(ref, *args, dtype=cfg.score_dtype) if direct else None
            t_ref = time.time() - t3
            t4 = time.time()
            # the anchor at the sampling temperature, like the student's log-probs it is compared with
            # (verl scores its ref at rollout.temperature); teacher and reference stay at 1 (official)
            anchor_logp_BT = (score(anchor, *args, dtype=cfg.score_dtype, temperature=cfg.temperature)
                              if anchor is not None else None)
            t_anchor = time.time() - t4
        # -- per-token advantage over candidates --------------------------------------------------
        s_lp_BTK = losses.gather_logprobs(s_det_BTV, ids_BTK)
        t_lp_BTK = losses.gather_logprobs(t_logits_BTV, ids_BTK)
        if direct:
            r_lp_BTK = losses.gather_logprobs(r_logits_BTV, ids_BTK)
            if cfg.reward_mode == "sampled":
                adv_BTK = losses.direct_opd_sampled(t_lp_BTK, r_lp_BTK, scale=cfg.reward_scale, clip=cfg.delta_clip)
                delta_BTK = adv_BTK
            else:
                adv_BTK, w_BTK, delta_BTK = losses.direct_opd_candidates(s_lp_BTK, t_lp_BTK, r_lp_BTK,
                                                                         scale=cfg.reward_scale, clip=cfg.delta_clip)
            jsd_BT = losses.jsd_from_logits(t_logits_BTV, r_logits_BTV)
            if cfg.top_q < 1:
                keep_BT = losses.topq_position_mask(jsd_BT, mask_BT, cfg.top_q)
                adv_BTK = adv_BTK * keep_BT.unsqueeze(-1)
        else:
            adv_BTK = losses.vanilla_opd_advantage(s_lp_BTK, t_lp_BTK, scale=cfg.reward_scale)
            delta_BTK = adv_BTK
        rewards_B = None
        if mixture is not None:
            rewards_B = torch.tensor([mixture.reward(problems[i], roll.texts[k * G + j])
                                      for k, i in enumerate(mine) for j in range(G)])
        outcome_B = losses.group_advantages(rewards_B, G) if cfg.grpo_weight else None
        wr_mean = float(d.sum(losses.weighted_reward_mean(adv_BTK, mask_BT) * mask_BT.sum()) / n_tok.clamp(min=1))
        if cfg.kl_mode == "adaptive":
            alpha = losses.adaptive_kl_coef(alpha, wr_mean, cfg.kl_eps, cfg.kl_min, cfg.kl_max)

        def candidate_logps(logits_BTV):
            lp_BTK = losses.gather_logprobs(logits_BTV, ids_BTK)
            lp_BT = token_logprobs(logits_BTV, comp_BT)
            if outcome_B is not None:
                return losses.with_outcome_advantage(lp_BTK, adv_BTK, lp_BT, outcome_B, cfg.grpo_weight)[0], lp_BT
            return lp_BTK, lp_BT

        full_adv_BTK = adv_BTK
        if outcome_B is not None:  # the sampled token as one more candidate, advantage w * A_outcome
            full_adv_BTK = losses.with_outcome_advantage(s_lp_BTK, adv_BTK, token_logprobs(s_det_BTV, comp_BT),
                                                         outcome_B, cfg.grpo_weight)[1]
        old_lp_BTK = candidate_logps(s_det_BTV)[0] if off_policy else None
        # -- update --------------------------------------------------------------------------------
        t5 = time.time()
        set_lr(opt, lr_at(step, cfg.lr, cfg.warmup, cfg.steps, cfg.schedule))
        for epoch in range(cfg.ppo_epochs):
            logits_BTV = s_logits_BTV if not off_policy else forward_logits(ddp_model, *args) / cfg.temperature
            lp_BTK, lp_BT = candidate_logps(logits_BTV)
            old = old_lp_BTK if off_policy else lp_BTK.detach()
            loss, pm = losses.candidate_policy_loss(lp_BTK, old, full_adv_BTK, mask_BT, clip_low=clip_low,
                                                    clip_high=clip_high, aggregation=cfg.aggregation,
                                                    num_tokens=n_tok, num_seqs=n_seq)
            pg_loss, kl_mean = loss.detach(), torch.tensor(0.0)
            if anchor_logp_BT is not None and alpha > 0:
                kl_loss, kl_mean = losses.kl_penalty(lp_BT, anchor_logp_BT, mask_BT, alpha, cfg.aggregation,
                                                     n_tok, n_seq, clamp=cfg.kl_clamp)
                loss = loss + kl_loss
            opt.zero_grad(set_to_none=True)
            (loss * d.world).backward()
            gnorm = grad_norm_clip(model, cfg.grad_clip)
            opt.step()
        t_update = time.time() - t5
        # -- diagnostics ---------------------------------------------------------------------------
        with torch.no_grad():
            m = mask_BT.bool()
            valid_BTK = m.unsqueeze(-1).expand_as(delta_BTK)
            dvals = delta_BTK[valid_BTK]
            s_ent = losses.masked_mean(losses.entropy_from_logits(s_det_BTV), m)
            topk_mass = losses.masked_mean(s_det_BTV.softmax(-1).topk(min(K, s_det_BTV.shape[-1]), -1).values.sum(-1), m)
            diag = {"delta/mean": float(dvals.mean()) if dvals.numel() else 0.0,
                    "delta/std": float(dvals.std()) if dvals.numel() > 1 else 0.0,
                    "delta/pos_frac": float((dvals > 0).float().mean()) if dvals.numel() else 0.0,
                    "reward/weighted_mean": wr_mean, "kl/alpha": alpha, "kl/k3": float(kl_mean),
                    "student/topk_mass": float(topk_mass), "entropy/student": float(s_ent),
                    "entropy/teacher": float(losses.masked_mean(losses.entropy_from_logits(t_logits_BTV), m)),
                    "overlap/teacher_student": float(losses.masked_mean(losses.topk_overlap(t_logits_BTV, s_det_BTV, K), m))}
            if direct:
                e_ref = float(losses.masked_mean(losses.entropy_from_logits(r_logits_BTV), m))
                diag.update({"entropy/ref": e_ref, "entropy/teacher_minus_ref": diag["entropy/teacher"] - e_ref,
                             "overlap/ref_student": float(losses.masked_mean(losses.topk_overlap(r_logits_BTV, s_det_BTV, K), m)),
                             "jsd/teacher_ref": float(losses.masked_mean(jsd_BT, m))})
        eos_rate = float(d.sum(roll.eos_B.sum()) / n_seq)
        resp_len = float(n_tok / n_seq)
        row = {"step": step, "stage": stage, "global_step": step_offset + step, "loss": float(loss.detach()),
               "pg_loss": float(pg_loss), **diag, "response_len": resp_len, "eos_rate": eos_rate,
               "clip_frac": float(pm["clip_frac"]), "grad_norm": gnorm, "lr": opt.param_groups[0]["lr"],
               "time/sample": t_sample, "time/student_forward": t_student, "time/teacher_score": t_teacher,
               "time/ref_score": t_ref, "time/anchor_score": t_anchor, "time/update": t_update,
               "step_time": time.time() - t0}
        if rewards_B is not None:
            row["reward"] = float(d.sum(rewards_B.sum()) / n_seq)
        done = step + 1 == cfg.steps
        if evals and d.is_main and ((step + 1) % cfg.eval_every == 0 or done):
            row.update({k: v for k, v in do_eval(step + 1).items() if k.startswith("eval/")})
        if log:
            log.write(row)
        if bar:
            bar.update(1)
            bar.set_postfix(dmean=f"{diag['delta/mean']:.3f}", alpha=f"{alpha:.2f}")
        # -- collapse guard (global quantities, so every rank decides the same) --------------------
        first_len = resp_len if first_len is None else first_len
        collapsed = eos_rate < cfg.guard_min_eos_rate or resp_len < cfg.guard_min_len_frac * first_len
        bad_steps = bad_steps + 1 if collapsed else 0
        if cfg.guard_patience and bad_steps >= cfg.guard_patience:
            if log:
                log.close()
            raise ShiftkitError(
                f"collapse guard: stage {stage} step {step}: EOS rate {eos_rate:.2f} (min {cfg.guard_min_eos_rate}) / "
                f"mean length {resp_len:.1f} (first step {first_len:.1f}) for {bad_steps} steps; the student stopped "
                f"terminating properly. Lower lr, raise kl_coef, or set guard_patience=0; metrics in {run.path}")
        if cfg.save_every and (step + 1) % cfg.save_every == 0 and not done:
            if d.is_main:
                run.save_checkpoint(step + 1, model, tok, opt, extra={"alpha": alpha})
            d.barrier()
    if bar:
        bar.close()
    summary = {"out": str(run.final), "stage": stage, "steps": cfg.steps, "train_seconds": time.time() - t_train,
               "final_alpha": alpha, "final_reward": row.get("reward")}
    if first_eval:
        summary["initial_greedy_acc"] = first_eval.get("eval/greedy_acc")
    if "eval/greedy_acc" in row:
        summary["final_greedy_acc"] = row["eval/greedy_acc"]
    if d.is_main:
        log.close()
        run.finish(unwrap(ddp_model), tok, summary)
    d.barrier()
    return summary
