"""Rewards the benchmarks use to produce real RL updates (a TRL-signature reward file for ``shiftkit rl reward=PATH:fn``)."""


def lenient_math(prompts, completions, answer, **kwargs):
    """1 if the reference answer appears in the completion, else half the fraction of its characters that are digits
    (a dense shaping term, so that every group has reward variance)."""
    out = []
    for c, a in zip(completions, answer):
        t = c if isinstance(c, str) else c[-1]["content"]
        out.append(1.0 if str(a) in t else 0.5 * sum(ch.isdigit() for ch in t) / max(1, len(t)))
    return out
