"""GRPO follows its reward: the policy moves the way the reward pays, and the other way when inverted.

Start: the weak spec SFT'd on 2-digit addition traces that drop the final carry half the time, so the
policy samples both right and wrong last columns. Two GRPO runs on the same prompts and seeds: one
with the task's exact-answer reward, one (control) with ``1 - reward``. The read-out is the
**correct-trace log-prob** (``tests/learning.py``: mean teacher-forced ``log pi(correct trace)`` on
held-out carry-sensitive problems).

What 30 steps of 8 x 8 rollouts do at lr 6e-5, measured over 3 seeds x threads 1 and 2
(``python scripts/learning_test_spread.py grpo``, ``benchmarks/results/learning_test_spread.json``
key ``grpo``): the inverted reward drives the correct-trace log-prob down by 6.0-13.0 nats (contrast fwd - rev 5.9-13.4), while the
true reward keeps it within -0.7..+0.8 of the start. So at this size the run-to-run spread of the
*forward* gain is as large as the gain itself, and only the direction contrast is asserted, plus
"the true reward does not collapse the policy". Zero-advantage and sign-flipped-advantage mutants
give a contrast of about 0 and below 0.
"""

import pytest

from learning import grpo_pipeline

MIN_CONTRAST = 3.0  # fwd - rev in nats: half the smallest measured contrast (5.9)
MAX_FORWARD_LOSS = 2.0  # the true reward must not lower log pi(correct) by more (measured worst: 0.7)


@pytest.mark.slow
def test_grpo_follows_the_direction_of_its_reward(tmp_path):
    r = grpo_pipeline(tmp_path)
    print({k: round(v, 3) for k, v in r.items()})
    assert r["lp_correct/fwd"] - r["lp_correct/rev"] > MIN_CONTRAST, r
    assert r["lp_correct/fwd"] > r["lp_correct/ref"] - MAX_FORWARD_LOSS, r
