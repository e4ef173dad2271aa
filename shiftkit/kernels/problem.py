"""Problems: KernelBench-compatible Python files, loaded in the trusted parent.

A problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()`` with
module-level size constants, exactly as in KernelBench. Optional module-level extras:

- ``SHAPE_VARIANTS = [{"batch_size": 7}, ...]``: overrides of module globals under which ``get_inputs()``
  yields other shapes (``get_init_inputs()`` must not change); a solution that hard-codes the default
  shape fails them.
- ``ALLOW_REDUCED_PRECISION = True``: lets solutions use half/bf16/TF32/fast-math.
- ``ATOL`` / ``RTOL``: per-problem tolerance overrides (ATOL is a fraction of the output's rms, as in
  :mod:`correctness`).
- ``ORIGINAL_SIZES = {...}``: written by ``import-kernelbench --scale cpu``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from shiftkit.errors import ShiftkitError


@dataclass
class KernelProblem:
    name: str
    path: Path
    source: str
    module: ModuleType = field(repr=False)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @property
    def shape_variants(self) -> list[dict[str, Any]]:
        return list(getattr(self.module, "SHAPE_VARIANTS", []) or [])

    @property
    def allow_reduced_precision(self) -> bool:
        return bool(getattr(self.module, "ALLOW_REDUCED_PRECISION", False))

    @property
    def tolerance_override(self) -> tuple[float | None, float | None]:
        return getattr(self.module, "ATOL", None), getattr(self.module, "RTOL", None)

    def init_inputs(self) -> list:
        return list(self.module.get_init_inputs())

    def make_model(self, seed: int):
        import torch

        torch.manual_seed(seed)
        return self.module.Model(*self.init_inputs()).eval()

    @contextlib.contextmanager
    def variant(self, overrides: dict[str, Any] | None):
        """Temporarily set module globals (a shape variant)."""
        old = {}
        try:
            for k, v in (overrides or {}).items():
                if not hasattr(self.module, k):
                    raise ShiftkitError(f"problem {self.name}: shape variant sets unknown global {k!r}")
                old[k] = getattr(self.module, k)
                setattr(self.module, k, v)
            yield
        finally:
            for k, v in old.items():
                setattr(self.module, k, v)

    def inputs(self, seed: int, variant: dict[str, Any] | None = None) -> list:
        import torch

        with self.variant(variant):
            torch.manual_seed(seed)
            return list(self.module.get_inputs())


def _import_file(path: Path, modname: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ShiftkitError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - a broken problem file is a user error
        sys.modules.pop(modname, None)
        raise ShiftkitError(f"problem {path} failed to import: {type(e).__name__}: {e}") from None
    return mod


def load_problem(path: str | Path) -> KernelProblem:
    """Load a KernelBench-format problem file (trusted code) into this process."""
    p = Path(path)
    if p.is_dir():
        cand = [p / "model.py", p / "problem.py"]
        p = next((c for c in cand if c.is_file()), p / "model.py")
    if not p.is_file():
        raise ShiftkitError(f"problem file not found: {p} (pass a KernelBench-style .py file)")
    src = p.read_text()
    h = hashlib.sha256(src.encode()).hexdigest()[:12]
    mod = _import_file(p, f"_sk_problem_{h}")
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(mod, attr):
            raise ShiftkitError(f"problem {p} lacks {attr}; a problem defines Model, get_inputs, get_init_inputs")
    return KernelProblem(name=p.stem, path=p.resolve(), source=src, module=mod)


Problem = KernelProblem  # the name used before issue #21 (agent code and configs may still say it)
