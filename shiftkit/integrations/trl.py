"""Direct-OPD and vanilla OPD as TRL trainers, so runs get TRL's generation (vLLM colocate/server),
DeepSpeed and FSDP without shiftkit growing its own. Pinned to ``trl==1.16.0`` (the ``trl`` extra).

:class:`DirectOPDTrainer` subclasses TRL's public :class:`trl.GRPOTrainer` and overrides two
methods, nothing else:

* ``_generate_and_score_completions``: after TRL has generated (``use_vllm`` or transformers) and
  padded the completions, the student picks its candidates (sampled token, top-K, or the whole
  vocabulary), the frozen teacher and its pre-RL reference score them, the KL anchor (the student at
  the start of training) scores the sampled tokens, and the advantage is the native loop's:
  :func:`shiftkit.advantages.direct_opd_signal` (vanilla OPD included), on chunked heads
  (:mod:`shiftkit.logprobs`), with the generation batch as one micro-batch.
  The adaptive KL coefficient is updated here, once per generation batch, from the global weighted
  mean reward (:func:`~shiftkit.advantages.adaptive_kl_coef`), before the update, as the native loop.
* ``_compute_loss``: :func:`shiftkit.losses.candidate_policy_loss` + ``alpha *``
  :func:`shiftkit.losses.kl_penalty`, normalised by the global token (or sequence) count of the
  generation batch and scaled exactly like TRL's ``dapo`` loss, so TRL's gradient accumulation and
  data-parallel averaging give the global-batch gradient.

No ``[B, T, V]`` tensor is built: log-probs come from the models' last hidden states ``[B, T, H]``
chunk by chunk. ``full_vocab`` keeps the teacher's and reference's hidden states for the loss
(:func:`shiftkit.losses.direct_opd_full_vocab_loss`);
that needs their output layer unsharded, so it is refused under FSDP and DeepSpeed ZeRO-3 (use
``student_topk``, the official default, there). Frozen models are placed like TRL's reference
model (``prepare_deepspeed`` / ``prepare_fsdp`` / ``accelerator.prepare_model(evaluation_mode=True)``).

Before training, the preflight of the native loop runs (:mod:`shiftkit.opd.preflight`): the teacher
and its reference must differ, and student, teacher and reference must agree on vocabulary, special
tokens, chat template, prompt rendering and output size (``allow_tokenizer_mismatch`` overrides).

GRPOConfig fields used: ``temperature`` (sampling; the student and the anchor are scored at it,
teacher and reference at 1), ``epsilon``/``epsilon_high`` (the PPO clip; inactive on-policy, where the
ratio is 1), ``num_generations``, ``max_completion_length``, ``use_vllm`` and the rest of TRL's
generation and engine settings. ``beta`` must stay 0 (the KL is :class:`OPDArgs`' ``kl_*``) and
``loss_type`` is ignored (the loss is shiftkit's). LoRA: pass TRL's ``peft_config``; the KL anchor
is a copy of the base student taken before TRL wraps it.

Multi-GPU recipe (written from TRL's documented usage; **not run in this project**, which has no GPU
in CI; only the CPU path below is tested)::

    from shiftkit.integrations.trl import DirectOPDTrainer, GRPOConfig, OPDArgs
    args = GRPOConfig(output_dir="runs/opd_trl", per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=2048, temperature=1.0, learning_rate=1e-6, bf16=True,
                      use_vllm=True, vllm_mode="colocate")      # or "server" + `trl vllm-serve --model <student>`
    trainer = DirectOPDTrainer("Qwen/Qwen3-1.7B", "<teacher after RL>", "<teacher before RL>",
                               opd_args=OPDArgs(reward_mode="student_topk", top_k=16), args=args,
                               train_dataset=ds)            # a dataset with a "prompt" column
    trainer.train()

    accelerate launch --config_file <your DeepSpeed or FSDP accelerate config> train.py   # TRL's own multi-GPU path

Placement: the teacher, its reference and the KL anchor are frozen copies on **every training
GPU**, prepared like TRL's reference model (sharded under ZeRO-3/FSDP, replicated under ZeRO-2/DDP),
so budget three extra models per GPU in ``score_dtype`` (fp32 by default, the official setting;
``score_dtype="bfloat16"`` halves it). With ``vllm_mode="server"`` the generation runs on separate
GPUs; with ``colocate`` it shares them.
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from shiftkit import advantages, logprobs, losses
from shiftkit.errors import ShiftkitError
from shiftkit.models import load_model_and_tokenizer
from shiftkit.opd import preflight as pf
from shiftkit.opd.loop import OPDKeys

try:
    from trl import GRPOConfig, GRPOTrainer
    from trl.models import prepare_deepspeed, prepare_fsdp
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("shiftkit.integrations.trl needs TRL: pip install 'shiftkit[trl]' (trl==1.16.0)") from e

TRL_VERSION = "1.16.0"
METHODS = ("direct_opd", "vanilla_opd")

__all__ = ["DirectOPDTrainer", "GRPOConfig", "OPDArgs", "TRL_VERSION"]


@dataclasses.dataclass
class OPDArgs(OPDKeys):
    """The OPD settings: :class:`shiftkit.opd.loop.OPDKeys` (the native loop's keys and defaults), plus the
    logit chunk of the chunked heads. ``method``: direct_opd | vanilla_opd."""

    chunk: int | None = None  # positions per chunk of the chunked log-probs (default: shiftkit.logprobs.default_chunk)

    def validate(self) -> None:
        self.validate_opd("OPDArgs", METHODS)


def no_outcome_reward(completions, **kwargs) -> list[float]:
    """TRL needs a reward function; OPD's signal is dense and per token, so the outcome reward is 0."""
    return [0.0] * len(completions)


def _load(model):
    if model is None or not isinstance(model, str):
        return model
    return load_model_and_tokenizer(model)[0]


def _tokenizer_for(model, given, fallback):
    if given is not None:
        return given
    path = getattr(getattr(model, "config", None), "_name_or_path", "") or getattr(model, "name_or_path", "")
    if path:
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError):
            pass
    return fallback


class DirectOPDTrainer(GRPOTrainer):
    """Direct-OPD (``opd_args.method='direct_opd'``, needs ``teacher_ref_model``) or vanilla OPD on TRL.

    ``model``, ``teacher_model``, ``teacher_ref_model``: HF models or paths (the teacher after RL, the
    same weak model before RL). Other arguments as :class:`trl.GRPOTrainer` (``reward_funcs`` default:
    a zero reward, since OPD's signal is dense).
    """

    def __init__(self, model, teacher_model, teacher_ref_model=None, *, opd_args: OPDArgs | None = None,
                 args: GRPOConfig | None = None, reward_funcs=None, teacher_processing_class=None,
                 ref_processing_class=None, **kwargs):
        opd = opd_args or OPDArgs()
        opd.validate()
        if args is not None and args.beta != 0.0:
            raise ShiftkitError("DirectOPDTrainer: leave GRPOConfig.beta at 0; the KL to the student's start is "
                                "OPDArgs.kl_mode/kl_coef")
        direct = opd.method == "direct_opd"
        if direct and teacher_ref_model is None:
            raise ShiftkitError("Direct-OPD needs teacher_ref_model (the teacher before RL)")
        student = _load(model)
        teacher, ref = _load(teacher_model), _load(teacher_ref_model) if direct else None
        # the KL anchor: the student as it starts (a copy taken before TRL wraps it, e.g. in PEFT)
        anchor = copy.deepcopy(student) if opd.kl_mode != "none" else None
        if anchor is not None:  # an instance-level forward (accelerate/TRL wrappers) would still call the original
            anchor.__dict__.pop("forward", None)
        super().__init__(student, reward_funcs=reward_funcs if reward_funcs is not None else [no_outcome_reward],
                         args=args, **kwargs)
        if opd.reward_mode == "full_vocab" and direct:
            if self.is_fsdp_enabled or (self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage == 3):
                raise ShiftkitError("reward_mode=full_vocab needs unsharded output layers (chunked from hidden "
                                    "states); under FSDP or ZeRO-3 use reward_mode=student_topk")
            if self.num_iterations > 1 or self.args.gradient_accumulation_steps % self.args.steps_per_generation:
                raise ShiftkitError("reward_mode=full_vocab is on-policy only (num_iterations=1, steps_per_generation"
                                    " dividing gradient_accumulation_steps)")
        self.opd = opd
        self.opd_alpha = opd.kl_coef if opd.kl_mode != "none" else 0.0
        self.opd_tokenizer_differences = self._opd_preflight(teacher, ref, teacher_processing_class,
                                                             ref_processing_class)
        self.opd_teacher = self._prepare_frozen(teacher)
        self.opd_ref = self._prepare_frozen(ref)
        self.opd_anchor = self._prepare_frozen(anchor)

    # ---- setup ---------------------------------------------------------------------------------

    def _prepare_frozen(self, m):
        if m is None:
            return None
        m = m.eval().requires_grad_(False)
        if self.is_deepspeed_enabled:
            return prepare_deepspeed(m, self.accelerator)
        if self.is_fsdp_enabled:
            return prepare_fsdp(m, self.accelerator)
        return self.accelerator.prepare_model(m, evaluation_mode=True)

    def _opd_preflight(self, teacher, ref, ttok, rtok) -> list[str]:
        stok = getattr(self.processing_class, "tokenizer", self.processing_class)
        named = {"student": (self.accelerator.unwrap_model(self.model), stok),
                 "teacher": (teacher, _tokenizer_for(teacher, ttok, stok))}
        if ref is not None:
            pf.check_distinct(teacher, ref, "teacher_model", "teacher_ref_model")
            named["teacher_ref"] = (ref, _tokenizer_for(ref, rtok, stok))
        prompts = []
        if self.train_dataset is not None and "prompt" in getattr(self.train_dataset, "column_names", []):
            for p in self.train_dataset[: 16]["prompt"]:
                prompts.append(p if isinstance(p, str) else
                               stok.apply_chat_template(p, tokenize=False, add_generation_prompt=True))
        return pf.check_tokenizers(named, prompts, self.opd.allow_tokenizer_mismatch)

    def _unwrap(self, m):
        return self.accelerator.unwrap_model(m) if m is not None else None

    # ---- the two overrides -----------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        o, T = self.opd, self.temperature
        mode = "train" if self.model.training else "eval"
        direct = o.method == "direct_opd"
        comp = out["completion_ids"]
        mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        args_ = (out["prompt_ids"], out["prompt_mask"], comp, out["completion_mask"])
        student, teacher, ref = self._unwrap(self.model), self._unwrap(self.opd_teacher), self._unwrap(self.opd_ref)
        with torch.no_grad():  # the native loop's signal, with the generation batch as one micro-batch
            s = logprobs.model_head(student, *args_, temperature=T)
            t = logprobs.model_head(teacher, *args_, dtype=o.score_dtype)
            r = logprobs.model_head(ref, *args_, dtype=o.score_dtype) if direct else None
            sig = advantages.direct_opd_signal(s, t, r, comp, mask, mode=o.reward_mode if direct else "sampled",
                                               k=o.top_k, scale=o.reward_scale, clip=o.delta_clip, top_q=o.top_q,
                                               chunk=o.chunk)
            if sig.ids_btk is None:  # full_vocab: the loss rebuilds the frozen heads from their last hidden states
                out["opd_teacher_hidden"], out["opd_ref_hidden"] = t.hidden_BTH, r.hidden_BTH
                if sig.keep_bt is not None:
                    out["opd_keep"] = sig.keep_bt.float()
            else:
                out["opd_ids"], out["opd_adv"] = sig.ids_btk, sig.adv_btk
                if "old_per_token_logps" in out:  # TRL will reuse this batch after an update: keep the old policy
                    out["opd_old_logps"] = sig.student_lp_btk
            if self.opd_anchor is not None:  # at the sampling temperature, like the student's log-probs
                out["opd_anchor_logps"] = logprobs.score(self._unwrap(self.opd_anchor), *args_, dtype=o.score_dtype,
                                                   temperature=T, chunk=o.chunk)
        n_delta, d_sum, d_sq, _ = sig.moments
        reward_sum = (sig.reward_bt * mask).sum()
        # global counts and the adaptive KL signal (summed over processes, so every rank agrees)
        dev = comp.device
        stats = torch.stack([reward_sum.float(), torch.tensor(float(comp.shape[0]), device=dev), d_sum.float(),
                             d_sq.float(), torch.as_tensor(n_delta, device=dev).float()]).to(dev)
        stats = self.accelerator.reduce(stats, reduction="sum") if self.accelerator.num_processes > 1 else stats
        n_tok = out["num_items_in_batch"].float().clamp(min=1.0)
        wr_mean = float(stats[0] / n_tok)
        out["opd_num_seqs"] = stats[1].clone()
        if o.kl_mode == "adaptive" and mode == "train":
            self.opd_alpha = advantages.adaptive_kl_coef(self.opd_alpha, wr_mean, o.kl_eps, o.kl_min, o.kl_max)
        nd = float(stats[4].clamp(min=1.0))
        mean = float(stats[2]) / nd
        self._metrics[mode]["opd/reward_weighted_mean"].append(wr_mean)
        self._metrics[mode]["opd/delta_mean"].append(mean)
        self._metrics[mode]["opd/delta_std"].append(max(0.0, float(stats[3]) / nd - mean * mean) ** 0.5)
        self._metrics[mode]["opd/kl_alpha"].append(self.opd_alpha)
        return out

    def _compute_loss(self, model, inputs):
        o, T = self.opd, self.temperature
        comp = inputs["completion_ids"]
        mask = inputs["completion_mask"] if "tool_mask" not in inputs else inputs["completion_mask"] * inputs["tool_mask"]
        args_ = (inputs["prompt_ids"], inputs["prompt_mask"], comp, inputs["completion_mask"])
        n_tok, n_seq = inputs["num_items_in_batch"].float(), inputs["opd_num_seqs"]
        kw = dict(clip_low=self.epsilon_low, clip_high=self.epsilon_high, aggregation=o.aggregation,
                  num_tokens=n_tok, num_seqs=n_seq)
        mode = "train" if self.model.training else "eval"
        s = logprobs.model_head(model, *args_, temperature=T)  # chunked log-probs: no [B, T, V]
        if "opd_teacher_hidden" in inputs:  # full_vocab
            t = logprobs.Head(inputs["opd_teacher_hidden"], *logprobs.lm_head_of(self._unwrap(self.opd_teacher)))
            r = logprobs.Head(inputs["opd_ref_hidden"], *logprobs.lm_head_of(self._unwrap(self.opd_ref)))
            loss, _ = losses.direct_opd_full_vocab_loss(s, t, r, mask, keep_BT=inputs.get("opd_keep"),
                                                        scale=o.reward_scale, clip=o.delta_clip, chunk=o.chunk, **kw)
            lp_BT = logprobs.token_logprobs(s, comp, o.chunk)
            clip_frac = None
        else:  # the candidates and the sampled token in one pass
            both = logprobs.gather_logprobs(s, torch.cat([inputs["opd_ids"], comp.unsqueeze(-1)], -1), o.chunk)
            lp_BTK, lp_BT = both[..., :-1], both[..., -1]
            old = inputs.get("opd_old_logps", lp_BTK.detach())
            loss, pm = losses.candidate_policy_loss(lp_BTK, old, inputs["opd_adv"], mask, **kw)
            clip_frac = float(pm["clip_frac"])
        if "opd_anchor_logps" in inputs and self.opd_alpha > 0:
            kl_loss, kl_mean = losses.kl_penalty(lp_BT, inputs["opd_anchor_logps"], mask, self.opd_alpha,
                                                 o.aggregation, n_tok, n_seq, clamp=o.kl_clamp)
            loss = loss + kl_loss
            self._metrics[mode]["opd/kl_k3"].append(float(kl_mean))
        if clip_frac is not None:
            self._metrics[mode]["opd/clip_frac"].append(clip_frac)
        # TRL's dapo scaling: its accumulation over steps_per_generation slices and its DDP mean over
        # processes then give the global-batch gradient of the globally normalised loss
        factor = float(self.accelerator.num_processes)
        if mode == "train":
            ga = getattr(self, "current_gradient_accumulation_steps", self.args.gradient_accumulation_steps)
            factor *= self.args.steps_per_generation / ga
        return loss * factor

