"""avg@k, pass@k, length and truncation metrics, with hand-computed values."""

import math

import pytest

from shiftkit.metrics import (avg_at_k, greedy_summary, length_stats, mean_se, pass_at_k, pass_at_k_reference,
                              pass_at_ks, sample_summary, truncation_rate)


def test_avg_at_k_by_hand():
    # problem 1: 3 of 4 correct, problem 2: 1 of 4, problem 3: 0 of 4 -> per-problem 0.75, 0.25, 0
    scores = [[1, 1, 0, 1], [0, 0, 1, 0], [0, 0, 0, 0]]
    m, se = avg_at_k(scores)
    assert m == pytest.approx(1 / 3)
    # std(ddof=1) of (0.75, 0.25, 0): mean 1/3, squared deviations 25/144, 1/144, 16/144 -> var 21/144
    assert se == pytest.approx(math.sqrt(21 / 144 / 3))
    assert avg_at_k([[float("nan"), 1.0]]) == (0.5, 0.0)  # an unscored sample is not correct
    assert avg_at_k([[0.5, 0.2]], threshold=0.3)[0] == 0.5  # a reward above threshold counts as correct
    assert avg_at_k([[1.0]])[0] == 1.0  # degenerate: one problem, one sample


def test_pass_at_k_by_hand_and_against_binomials():
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # C(3,2)/C(4,2) = 3/6
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    for n in (1, 5, 32):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(pass_at_k_reference(n, c, k), abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    out = pass_at_ks([[1, 0, 0, 0], [1, 1, 0, 0]], [1, 2])
    assert out["pass@1"] == pytest.approx((0.25 + 0.5) / 2)
    assert out["pass@2"] == pytest.approx((0.5 + (1 - 1 / 6)) / 2)


def test_pass_at_1_equals_avg_at_k():
    scores = [[1, 0, 1, 1, 0], [0, 0, 0, 1, 0], [1, 1, 1, 1, 1]]
    assert pass_at_ks(scores, [1])["pass@1"] == pytest.approx(avg_at_k(scores)[0])


def test_truncation_and_lengths_by_hand():
    assert truncation_rate([True, False, True, True]) == 0.25
    assert math.isnan(truncation_rate([]))
    assert length_stats([3, 1, 10, 4]) == {"mean": 4.5, "median": 3.5, "max": 10.0}
    assert length_stats([5, 1, 2])["median"] == 2.0
    assert mean_se([2.0]) == (2.0, 0.0) and math.isnan(mean_se([])[0])


def test_sample_and_greedy_summaries():
    scores = [[1, 0], [0, 0]]
    s = sample_summary(scores, [[10, 20], [30, 40]], [[True, False], [True, True]])
    assert s["avg@2"] == 0.25 and s["pass@1"] == 0.25 and s["pass@2"] == 0.5
    assert s["response_length/mean"] == 25.0 and s["truncation_rate"] == 0.25 and s["n_samples"] == 2
    with pytest.raises(ValueError, match="same number of samples"):
        sample_summary([[1], [1, 0]], [[1], [1, 1]], [[True], [True, True]])
    g = greedy_summary([1.0, 0.0, float("nan"), 1.0], [5, 5, 7, 3], [True, True, False, True])
    assert g["greedy_acc"] == 0.5 and g["greedy_truncation_rate"] == 0.25 and g["greedy_response_length/mean"] == 5.0


def test_default_ks_end_at_the_sample_count():
    from shiftkit.metrics import default_ks

    assert default_ks(32) == [1, 2, 4, 8, 16, 32] and default_ks(3) == [1, 2, 3] and default_ks(1) == [1]
