"""The weak-to-strong (and demo) report's verdicts: one seed resolves nothing; with several seeds a claim holds
or fails only beyond one problem and twice the seed std."""

from shiftkit.recipes.weak_to_strong import W2SConfig, claims, verdict


def ev(*accs):
    return {str(i): {"greedy_acc": a} for i, a in enumerate(accs)}


def test_one_seed_is_never_a_verdict():
    cfg = W2SConfig(seeds=[0], eval_n=100)
    base = {"strong": {"greedy_acc": 0.43}, "weak_rl": ev(0.535)}
    res = {"direct_opd_topk": ev(0.935), "vanilla_opd": ev(0.93), "grpo": ev(0.96), "composition": ev(0.93)}
    text = "\n".join(claims(cfg, res, base))
    assert "**holds**" not in text and "**does not hold**" not in text  # not even the +50-point gain
    assert text.count("**not resolved (1 seed)**") == 5
    assert "43.0% -> 93.5%" in text and "(93.0% vs 93.5%)" in text


def test_three_seeds_resolve_large_gaps_only():
    cfg = W2SConfig(seeds=[0, 1, 2], eval_n=100)
    base = {"strong": {"greedy_acc": 0.43}, "weak_rl": ev(0.53, 0.55, 0.54)}
    res = {"direct_opd_topk": ev(0.93, 0.94, 0.92), "vanilla_opd": ev(0.90, 0.95, 0.93), "grpo": ev(0.99, 0.99, 0.98),
           "composition": ev(0.70, 0.72, 0.71)}
    text = "\n".join(claims(cfg, res, base))
    assert "improves the strong student: 43.0% -> 93.0%: **holds**" in text
    assert "above its weak teacher (54.0%): **holds**" in text
    assert "vanilla OPD from the weak teacher (92.7% vs 93.0%): **not resolved**" in text  # within the seed spread
    assert "step-matched GRPO (98.7% vs 93.0%): **does not hold**" in text
    assert "single shift (71.0% vs 93.0%): **does not hold**" in text


def test_verdict_rule_hand_values():
    assert verdict([0.5, 0.52], [0.40], 100) == "holds"  # +11 points, std 0.014: gap 0.028
    assert verdict([0.5, 0.52], [0.50], 100) == "not resolved"  # +1 point < 2 std
    assert verdict([0.30, 0.31], [0.50], 100) == "does not hold"
    assert verdict([0.501, 0.501], [0.50], 100) == "not resolved"  # under one problem in 100
    assert verdict([None], [0.1], 100) == "not resolved (1 seed)"
    assert verdict([0.5, 0.5], [0.52, 0.52], 100, margin=0.02) == "not resolved"  # competitive within 2 points: 0
