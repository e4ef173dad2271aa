"""Shared setup for the kernel-environment tests: one build cache for the session (content-hash keyed, so
a warm re-run builds nothing) and the slow torch-binding build started in the background at once."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("SHIFTKIT_KERNEL_CACHE", str(REPO / ".cache" / "kernels-test"))
TORCH_BINDING = [
    REPO / "shiftkit/kernels/fixtures/solutions/kb_l1_19_ReLU/correct_load_inline.py",
]


@pytest.fixture(scope="session")
def torch_binding_build():
    from shiftkit.kernels.prebuild import prebuild_in_background

    return prebuild_in_background(TORCH_BINDING)
