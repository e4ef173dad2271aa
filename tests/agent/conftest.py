"""Agent tests share the kernel tests' content-hash build cache (a warm re-run builds nothing)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("SHIFTKIT_KERNEL_CACHE", str(REPO / ".cache" / "kernels-test"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(REPO / ".cache" / "inductor"))

import torch  # noqa: E402

torch.set_num_threads(1)  # the machine's cores are shared; tiny models are fastest on one thread
