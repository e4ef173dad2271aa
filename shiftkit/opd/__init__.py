"""Direct-OPD: transfer a weak model's RL policy shift to a stronger student (arXiv 2607.05394).

* :mod:`shiftkit.opd.loop`: the training loop (:func:`run_opd`, config :class:`OPDConfig`), with the
  vanilla-OPD and GRPO baselines and sequential composition (``stages``);
* :mod:`shiftkit.opd.preflight`: checks run before any training (teacher != reference, tokenizer
  agreement, scorer determinism);
* the per-token signals and losses are pure functions in :mod:`shiftkit.losses` (OPD section);
* the weak-to-strong experiment and the demo stage are a recipe: :mod:`shiftkit.recipes.weak_to_strong`.
"""
