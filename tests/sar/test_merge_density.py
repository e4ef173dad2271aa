"""``density`` (TIES / DARE) is range-checked before anything runs: outside (0, 1] the merge functions would
silently keep nothing (density <= 0: the merge is the base) or trim nothing (density > 1)."""

import pytest

from shiftkit.errors import ShiftkitError
from shiftkit.sar.pipeline import MergeConfig


@pytest.mark.parametrize("density", [0.0, -0.5, 1.5, float("nan")])
@pytest.mark.parametrize("method", ["ties", "dare_ties", "dare_linear"])
def test_density_outside_zero_one_is_an_error(method, density):
    cfg = MergeConfig(method=method, density=density)
    with pytest.raises(ShiftkitError, match=r"density must be in \(0, 1\]"):
        cfg.validate()


@pytest.mark.parametrize("density", [1e-3, 0.5, 1.0])
def test_density_in_range_is_accepted(density):
    MergeConfig(method="ties", density=density).validate()
