"""Direct-OPD inside verl, through verl's own registries (no fork). Written and tested against verl 0.9.1.

What it registers (idempotently, on import of this module, which verl does itself when it is listed in
``VERL_USE_EXTERNAL_MODULES=shiftkit.integrations.verl`` or found in the ``verl.plugins`` entry-point
group that shiftkit declares):

* advantage estimator ``shiftkit_direct_opd`` (``algorithm.adv_estimator``), through
  ``verl.trainer.ppo.core_algos.register_adv_est``: the official code's ``token_reward_direct``: the
  advantage is the Direct-OPD token reward itself on valid positions (no baseline, no discount, no
  normalisation), kept 3-D over K candidates. verl calls it as ``fn(token_level_rewards=...,
  response_mask=..., config=..., index=...)`` (``ray_trainer.compute_advantage``, generic branch);
* policy loss ``shiftkit_direct_opd`` (``actor.policy_loss.loss_mode``), through ``register_policy_loss``:
  :func:`shiftkit.losses.candidate_policy_loss` (the PPO surrogate per candidate, summed over K, then
  ``token-mean`` / ``seq-mean-token-mean`` over verl's *global* token / sequence counts). Called by verl as
  ``fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights)``.

The reward comes from the two frozen scorers as a verl worker, :class:`DirectOPDScorerWorker`
(``compute_rm_score``, ``Dispatch.DP_COMPUTE_PROTO``, the method and dispatch of verl's reward-model
role): it scores the candidates with the post-RL teacher and its pre-RL reference and returns
``rm_scores`` = :func:`direct_opd_rewards` (``shiftkit.advantages``: ``Delta`` at the sampled token, or
``sg[w * Delta]`` over the student's top-K), plus the raw ``opd_teacher_logp`` / ``opd_ref_logp``.
The KL anchor is verl's own (``actor.use_kl_loss=true``, ``kl_loss_type=low_var_kl``, the reference
worker holding the student's initial weights). Example: ``configs/verl/direct_opd.yaml``.

Batch layout (verl's, the same as shiftkit's): ``prompts`` ``[B, P]`` left-padded, ``responses``
``[B, T]`` right-padded, ``attention_mask`` ``[B, P + T]``, ``response_mask`` ``[B, T]``. Candidate mode
reads ``opd_candidate_ids`` and ``opd_student_logp`` ``[B, T, K]`` (the student's top-K ids and their
full-softmax log-probs, :func:`student_candidates`); without them it is the ``sampled`` mode.

Not run here (needs GPUs and a Ray cluster): the scorer worker inside a ``RayWorkerGroup`` and a whole
``main_ppo`` run. Stock verl 0.9.1's actor computes the log-prob of the *sampled* token only, so with
it the policy loss sees K = 1 (``sampled`` mode); the ``student_topk`` mode needs an actor that returns
the log-probs of ``opd_candidate_ids`` (the official Direct-OPD fork patches ``dp_actor`` for that).
verl's fixed ``kl_loss_coef`` replaces shiftkit's adaptive KL controller, and verl's dual-clip
``clip_ratio_c`` is not part of shiftkit's surrogate (not read).
"""

from __future__ import annotations

import torch

from shiftkit import advantages as A
from shiftkit import logprobs as LP
from shiftkit import losses

NAME = "shiftkit_direct_opd"  # the advantage estimator's and the policy loss's name in verl's registries
AGGREGATIONS = {"token-mean": "token_mean", "seq-mean-token-mean": "seq_mean"}  # verl loss_agg_mode -> shiftkit


def _split(data) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT)`` of a verl batch."""
    b = data.batch
    prompts, responses = b["prompts"], b["responses"]
    P = prompts.shape[1]
    mask = b["response_mask"] if "response_mask" in b.keys() else b["attention_mask"][:, P:]
    return prompts, b["attention_mask"][:, :P], responses, mask


@torch.no_grad()
def candidate_logprobs(model, data, ids_BTK: torch.Tensor | None = None, *, temperature: float = 1.0,
                       dtype=None, chunk: int | None = None) -> torch.Tensor:
    """Log-probs ``[B, T, K]`` of candidate ids (default: the sampled responses, K = 1) under ``model``,
    computed by :mod:`shiftkit.logprobs` exactly as the native loop scores them."""
    p_ids, p_mask, c_ids, c_mask = _split(data)
    dev = next(model.parameters()).device
    head = LP.model_head(model, p_ids.to(dev), p_mask.to(dev), c_ids.to(dev), c_mask.to(dev), dtype=dtype,
                         temperature=temperature)
    ids = c_ids.unsqueeze(-1) if ids_BTK is None else ids_BTK
    return LP.gather_logprobs(head, ids.to(dev), chunk).float().cpu()


@torch.no_grad()
def student_candidates(model, data, k: int, *, temperature: float = 1.0, dtype=None,
                       chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's top-``k`` ids and their full-softmax log-probs, both ``[B, T, K]`` (what an actor
    that supports the ``student_topk`` mode writes as ``opd_candidate_ids`` / ``opd_student_logp``)."""
    p_ids, p_mask, c_ids, c_mask = _split(data)
    dev = next(model.parameters()).device
    head = LP.model_head(model, p_ids.to(dev), p_mask.to(dev), c_ids.to(dev), c_mask.to(dev), dtype=dtype,
                         temperature=temperature)
    ids, lp = LP.student_topk(head, k, chunk)
    return ids.cpu(), lp.float().cpu()


def direct_opd_rewards(data, *, scale: float = 1.0, clip: float = 0.0) -> torch.Tensor:
    """The Direct-OPD token reward of a batch from its scorer columns (:mod:`shiftkit.advantages`):
    ``sampled`` (no ``opd_student_logp``): ``Delta`` ``[B, T]``; candidates: ``sg[w * Delta]`` ``[B, T, K]``."""
    b = data.batch
    t, r = b["opd_teacher_logp"], b["opd_ref_logp"]
    if "opd_student_logp" not in b.keys():
        if t.shape[-1] != 1:
            raise ValueError(f"opd_teacher_logp has K={t.shape[-1]} candidates but the batch has no opd_student_logp "
                             "(the weights of the student_topk mode)")
        return A.direct_opd_sampled(t[..., 0], r[..., 0], scale=scale, clip=clip)
    return A.direct_opd_candidates(b["opd_student_logp"], t, r, scale=scale, clip=clip)[0]


def direct_opd_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, config=None,
                         index=None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage estimator: the Direct-OPD reward is the advantage (official ``token_reward_direct``),
    zero on padding; ``[B, T]`` or ``[B, T, K]``. Returns ``(advantages, returns)`` (the same tensor)."""
    unused = sorted(k for k in kwargs if k != "reward_baselines")
    if unused:
        raise ValueError(f"{NAME}: advantage inputs {unused} are not read by Direct-OPD")
    m = response_mask.bool()
    m = m.unsqueeze(-1) if token_level_rewards.dim() == 3 else m
    adv = torch.where(m, token_level_rewards.float(), torch.zeros_like(token_level_rewards, dtype=torch.float32))
    return adv.detach(), adv.detach()


def direct_opd_policy_loss(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                           response_mask: torch.Tensor, loss_agg_mode: str = "token-mean", config=None,
                           rollout_is_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """verl policy loss: :func:`shiftkit.losses.candidate_policy_loss` (K = 1 when ``log_prob`` is
    ``[B, T]``), clip from ``config.clip_ratio_low/high``, aggregated over verl's global counts
    (``config.global_batch_info``: the loss is scaled by ``dp_size`` as verl's ``agg_loss`` does, so DP
    gradient averaging gives the global mean)."""
    if loss_agg_mode not in AGGREGATIONS:
        raise ValueError(f"{NAME}: loss_agg_mode={loss_agg_mode!r} is not supported (use {', '.join(AGGREGATIONS)})")
    if rollout_is_weights is not None:
        raise ValueError(f"{NAME}: rollout importance weights (algorithm.rollout_correction) are not supported")
    lp, old, adv = log_prob, old_log_prob, advantages
    if lp.dim() == 2:
        lp, old = lp.unsqueeze(-1), old.unsqueeze(-1)
    if adv.dim() == 2:
        adv = adv.unsqueeze(-1)
    if adv.shape != lp.shape:
        raise ValueError(f"{NAME}: advantages {tuple(advantages.shape)} do not match log-probs {tuple(log_prob.shape)} "
                         "(the student_topk mode needs an actor that returns the candidates' log-probs)")
    info = dict(getattr(config, "global_batch_info", None) or {})
    dp = float(info.get("dp_size") or 1)
    n_tok = info.get("batch_num_tokens")
    n_seq = info.get("global_batch_size")
    low = getattr(config, "clip_ratio_low", None) if config is not None else None
    high = getattr(config, "clip_ratio_high", None) if config is not None else None
    loss, pm = losses.candidate_policy_loss(lp, old, adv, response_mask, clip_low=low, clip_high=high,
                                            aggregation=AGGREGATIONS[loss_agg_mode],
                                            num_tokens=None if n_tok is None else float(n_tok) / dp,
                                            num_seqs=None if n_seq is None else float(n_seq) / dp)
    return loss, {"actor/pg_clipfrac": float(pm["clip_frac"]), "actor/ratio_mean": float(pm["ratio_mean"])}


def register() -> None:
    """Register the estimator and the loss in verl's registries (idempotent)."""
    try:
        from verl.trainer.ppo import core_algos
    except ImportError as e:
        from shiftkit.errors import ShiftkitError

        raise ShiftkitError(f"shiftkit.integrations.verl needs verl (>= 0.9.1): {e}") from None
    core_algos.ADV_ESTIMATOR_REGISTRY.pop(NAME, None)  # a reloaded module re-registers its own functions
    core_algos.register_adv_est(NAME)(direct_opd_advantage)
    core_algos.register_policy_loss(NAME)(direct_opd_policy_loss)


try:
    from verl import DataProto
    from verl.single_controller.base import Worker
    from verl.single_controller.base.decorator import Dispatch
    from verl.single_controller.base.decorator import register as _dispatch
except ImportError:  # without verl the pure functions above still import; register() names what is missing
    Worker = None

if Worker is not None:
    register()

    class DirectOPDScorerWorker(Worker):
        """The post-RL teacher and its pre-RL reference as one verl worker in the reward-model role
        (``compute_rm_score``). Both are frozen HF models; ``dtype`` float32 as the official run."""

        def __init__(self, teacher: str, teacher_ref: str, *, dtype: str = "float32", reward_scale: float = 1.0,
                     delta_clip: float = 0.0, chunk: int = 0, models: tuple | None = None):
            super().__init__()
            self.paths, self.dtype, self.models = (teacher, teacher_ref), dtype, models
            self.scale, self.clip, self.chunk = reward_scale, delta_clip, chunk or None

        @_dispatch(dispatch_mode=Dispatch.ONE_TO_ALL)
        def init_model(self):
            if self.models is None:
                from shiftkit.models import load_model

                device = "cuda" if torch.cuda.is_available() else "cpu"
                self.models = tuple(load_model(p, dtype=self.dtype, device=device).eval() for p in self.paths)

        @_dispatch(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
        def compute_rm_score(self, data: DataProto) -> DataProto:
            ids = data.batch["opd_candidate_ids"] if "opd_candidate_ids" in data.batch.keys() else None
            t, r = (candidate_logprobs(m, data, ids, chunk=self.chunk) for m in self.models)
            scored = data.union(DataProto.from_dict(tensors={"opd_teacher_logp": t, "opd_ref_logp": r}))
            rm = direct_opd_rewards(scored, scale=self.scale, clip=self.clip)
            return DataProto.from_dict(tensors={"rm_scores": rm, "opd_teacher_logp": t, "opd_ref_logp": r})
