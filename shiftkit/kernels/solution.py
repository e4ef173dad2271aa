"""Solutions: a single file with inline sources, or a CUDA-Agent-style workspace directory.

Single file (KernelBench style): a Python file defining ``ModelNew`` that builds its kernels at import
time with either

- ``torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])``
  (torch binding: the sources include torch headers; a cold build costs ~15-25 s on this machine), or
- ``shiftkit.kernels.runtime.load_c(name=..., source=...)`` (lean C ABI: ``extern "C"`` functions on raw
  pointers, no torch headers, built in ~1 s; called from Python with tensors).

The sources must be static literals (strings, names bound to strings, ``+``), so the trusted parent can
extract and build them before any candidate code runs. In the worker the same calls return the prebuilt
modules.

Workspace directory: ``model_new.py`` plus ``kernels/*`` and optional ``binding.cpp``/``*_binding.cpp``.
All sources build into one extension that ``model_new.py`` imports as ``kernel_ext`` (alias
``cuda_extension`` as in CUDA Agent). If no source uses torch headers, ``kernel_ext`` is the lean C ABI
library.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.findings import Finding
from shiftkit.kernels.specs import MAX_SOURCE_BYTES, BuildSpec, spec_from_load_c, spec_from_load_inline  # noqa: F401


@dataclass
class Solution:
    path: Path
    python_source: str
    python_name: str  # file name of the module defining ModelNew
    layout: str  # "file" | "workspace"
    specs: list[BuildSpec]
    findings: list[Finding]  # extraction problems (dynamic sources)
    backend: str = "cpu"
    python_files: dict[str, str] = field(default_factory=dict)  # every .py of a workspace (all are scanned)

    @property
    def hash(self) -> str:
        h = hashlib.sha256(self.python_source.encode())
        for k in sorted(self.python_files):
            h.update(k.encode() + self.python_files[k].encode())
        for s in self.specs:
            h.update(s.key().encode())
        return h.hexdigest()[:16]

    def cpp_sources(self) -> dict[str, str]:
        out = {}
        for s in self.specs:
            out.update({f"{s.name}/{k}": v for k, v in s.sources.items()})
        return out


def _uses_torch(text: str) -> bool:
    return any(t in text for t in ("PYBIND11_MODULE", "TORCH_LIBRARY", "<torch/", "<ATen/", "\"torch/", "\"ATen/"))


SOURCE_EXTS = (".cpp", ".cc", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".c")


def _read(p: Path, total: list[int]) -> str:
    data = p.read_bytes()
    total[0] += len(data)
    if total[0] > MAX_SOURCE_BYTES:
        raise _TooLarge(f"the solution's files exceed {MAX_SOURCE_BYTES >> 20} MB")
    return data.decode("utf-8", errors="replace")


class _TooLarge(Exception):
    pass


def load_solution(path: str | Path, backend: str = "cpu") -> Solution:
    """Read a solution file or workspace directory (nothing is executed); its Python is parsed in a limited
    subprocess (:mod:`analysis`), so a hostile file yields a finding, never a crash here."""
    from shiftkit.kernels.analysis import AnalysisFailed, run

    p = Path(path)
    total = [0]
    sources: dict[str, str] = {}
    try:
        if p.is_dir():
            mn = p / "model_new.py"
            if not mn.is_file():
                raise ShiftkitError(f"workspace {p} has no model_new.py")
            for f in sorted(p.rglob("*")):
                if f.is_file() and not f.is_symlink() and f.suffix in SOURCE_EXTS and "build" not in f.relative_to(p).parts:
                    sources[str(f.relative_to(p))] = _read(f, total)
            pys = {str(f.relative_to(p)): _read(f, total) for f in sorted(p.rglob("*.py"))
                   if f.is_file() and not f.is_symlink() and "build" not in f.relative_to(p).parts}
            main, layout = "model_new.py", "workspace"
        elif p.is_file():
            pys, main, layout = {p.name: _read(p, total)}, p.name, "file"
        else:
            raise ShiftkitError(f"solution not found: {p} (pass a .py file or a workspace directory)")
    except _TooLarge as e:
        return Solution(p.resolve(), "", "model_new.py" if p.is_dir() else p.name, "workspace" if p.is_dir() else "file",
                        [], [Finding("analysis_failed", str(e), "error")], backend)
    specs: list[BuildSpec] = []
    if sources:
        kind = "torch" if any(_uses_torch(t) for t in sources.values()) else "c"
        be = "cuda" if any(k.endswith((".cu", ".cuh")) for k in sources) else backend
        specs.append(BuildSpec(name="kernel_ext", kind=kind, backend=be, sources=sources))
    try:
        out = run({"op": "solution", "files": pys, "main": main, "backend": backend})
        specs += [BuildSpec(**d) for d in out["specs"]]
        findings = [Finding.from_dict(d) for d in out["findings"]]
    except (AnalysisFailed, KeyError, TypeError, ValueError) as e:
        findings = [Finding("analysis_failed", f"the solution's Python could not be analysed: {str(e)[:300]}", "error")]
    helpers = {k: v for k, v in pys.items() if k != main} if layout == "workspace" else {}
    return Solution(p.resolve(), pys.get(main, ""), main, layout, specs, findings, backend, helpers)
