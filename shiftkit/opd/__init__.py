"""Direct-OPD: transfer a weak model's RL policy shift to a stronger student (arXiv 2607.05394).

* :mod:`shiftkit.opd.loop`: the training loop (:func:`run_opd`, config :class:`OPDConfig`, the Direct-OPD
  keys :class:`OPDKeys` shared with TRL), with the
  vanilla-OPD and GRPO baselines and sequential composition (``stages``);
* :mod:`shiftkit.opd.preflight`: checks run before any training (teacher != reference, tokenizer
  agreement, scorer determinism);
* the per-token signal is :func:`shiftkit.advantages.direct_opd_signal` (also the TRL trainer's,
  :mod:`shiftkit.integrations.trl`), the losses :func:`shiftkit.losses.candidate_policy_loss` and
  :func:`shiftkit.losses.direct_opd_full_vocab_loss`;
* the weak-to-strong experiment and the demo stage are a recipe: :mod:`shiftkit.recipes.weak_to_strong`.
"""
