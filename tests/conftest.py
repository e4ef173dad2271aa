import os

import pytest
import torch

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the commands a test starts as processes: one thread each
torch.set_num_threads(1)  # on a loaded or shared machine 2 threads per process measured up to 8x slower than 1


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (no GPU on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


SLOW_S = 120.0


def pytest_runtest_logreport(report):
    """A test slower than SLOW_S is named in the log as it ends, so a CI log cut off by the run's time limit
    still says where the time went (the --durations table is printed only at the end)."""
    if report.duration > SLOW_S:
        import sys

        sys.stderr.write(f"\n[slow] {report.duration:.0f} s {report.when} {report.nodeid}\n")


# tests/learning.py (shared pieces of the "it learns" tests) is importable as `learning`
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def free_port() -> str:
    """A TCP port free right now on loopback, for a multi-process test's rendezvous (tests never
    share a fixed port, so two suites or a lingering run cannot collide)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])
