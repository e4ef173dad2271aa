"""Backend registry: how kernel sources of each kind are compiled and whether this machine can run them."""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, field

from shiftkit.errors import ShiftkitError


@dataclass(frozen=True)
class Backend:
    name: str
    device: str
    source_exts: tuple[str, ...]
    cflags: tuple[str, ...] = ()
    cuda_cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def available(self) -> tuple[bool, str]:
        return _AVAILABLE[self.name]()


def _cpu_ok() -> tuple[bool, str]:
    return True, "ok"


def _cuda_ok() -> tuple[bool, str]:
    import torch

    if not torch.cuda.is_available():
        return False, "torch.cuda.is_available() is False (no GPU or CPU-only torch build)"
    return True, torch.cuda.get_device_name(0)


_AVAILABLE = {"cpu": _cpu_ok, "cuda": _cuda_ok}

BACKENDS: dict[str, Backend] = {
    "cpu": Backend("cpu", "cpu", (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp"),
                   cflags=("-O3", "-fopenmp", "-march=native", "-std=c++17"), ldflags=("-fopenmp",),
                   notes="C++ with OpenMP/SIMD via torch.utils.cpp_extension"),
    "cuda": Backend("cuda", "cuda", (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp"),
                    cflags=("-O3", "-std=c++17"), cuda_cflags=("-O3",),
                    notes="CUDA C++ via torch.utils.cpp_extension"),
}


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ShiftkitError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
    return BACKENDS[name]


@functools.lru_cache(maxsize=1)
def machine_id() -> str:
    """CPU model + core count: part of build and baseline cache keys (-march=native builds are machine specific)."""
    model = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return f"{platform.machine()}|{model}|{os.cpu_count()}"
