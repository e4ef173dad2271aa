"""Direct-OPD moves a toy student along its teacher pair's shift, in the pair's direction.

The pair: the weak spec SFT'd on 2-digit addition traces that drop the final carry half the time
(``ref``), and the same model after more fine-tuning on correct traces (``teacher``): a shift that is
mostly "carry the last column". The student is ``ref`` itself (self-transfer, where the student's
states are on the pair's distribution).

What is measured: the **carry preference** (``tests/learning.py``), the mean over held-out
carry-sensitive problems of ``log pi(correct trace) - log pi(carry-dropping trace)``. The old version
of this test asserted +0.04 greedy accuracy and failed on another CPU (0.155 -> 0.188).

Control: the same run with the pair swapped (``teacher=ref, teacher_ref=teacher``), i.e. the
reversed shift, on the same prompts and seeds. Direct-OPD must move the preference up with the pair
and down with the swapped pair. A broken signal (zero, sign-flipped, teacher ignored) fails this.

Spread, measured with ``python scripts/learning_test_spread.py opd`` (3 seeds x threads 1 and 2,
results in ``benchmarks/results/learning_test_spread.json``); the margins are next to the constants
below. Mutants checked: the OPD advantage set to zero, and sign-flipped, both fail this test.
"""

import pytest

from learning import opd_pipeline

# Asserted margins, in nats of carry preference. Measured over 3 seeds x 2 thread counts at the
# current code (benchmarks/results/learning_test_spread.json, key "opd"): forward gain 1.93-3.10
# (std 0.48), reverse drop 1.44-2.16 (std 0.28), contrast fwd - rev 3.38-5.26 (mean 4.1, std 0.6),
# teacher - ref 9.5-12.7. Greedy accuracy on the same runs moved between -0.09 and +0.09: it is noise
# at this scale, so it is printed, not asserted. The zero-advantage and sign-flipped mutants give a
# contrast of 0 and -4.5.
MIN_CONTRAST = 1.5  # fwd - rev: 4 std below the measured mean, 1.9 nats below the smallest run
MIN_EACH_WAY = 0.5  # each direction alone: over 4 std below its median, under half the smallest run
MIN_PAIR_SHIFT = 4.0


@pytest.mark.slow
def test_direct_opd_moves_the_student_along_the_pair_shift(tmp_path):
    r = opd_pipeline(tmp_path)
    print({k: round(v, 3) for k, v in r.items()})
    assert r["pref/teacher"] > r["pref/ref"] + MIN_PAIR_SHIFT, "the pair must carry a shift to transfer"
    assert r["pref/fwd"] - r["pref/rev"] > MIN_CONTRAST, r
    assert r["pref/fwd"] > r["pref/ref"] + MIN_EACH_WAY, r
    assert r["pref/rev"] < r["pref/ref"] - MIN_EACH_WAY, r
