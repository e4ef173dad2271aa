"""Shared setup for the kernel-environment tests: one build cache for the session (content-hash keyed, so
a warm re-run builds nothing) and the slow torch-binding build, done once before the tests that use it."""

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
    """The slow torch-binding build, finished before the first test that uses it runs (a build still running
    in the background is a process of ours that the tests' leftover checks would see: on a cold cache, as in
    a fresh clone, every test that ran beside it failed). A finished Future, as prebuild_in_background gives."""
    from concurrent.futures import Future

    from shiftkit.kernels.prebuild import prebuild

    fut: Future = Future()
    try:
        fut.set_result(prebuild(TORCH_BINDING, workers=1))
    except Exception as e:  # noqa: BLE001 - the tests that need the build fail on result(); the others run
        fut.set_exception(e)
    return fut
