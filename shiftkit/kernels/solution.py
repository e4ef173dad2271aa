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

import ast
import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.findings import Finding


@dataclass
class BuildSpec:
    name: str  # the name the solution uses (load_inline name / "kernel_ext")
    kind: str  # "torch" (torch headers + pybind/TORCH_LIBRARY) | "c" (extern "C" ABI)
    backend: str  # cpu | cuda
    sources: dict[str, str]  # relative file name -> text
    functions: list[str] | None = None  # load_inline pybind glue
    extra_cflags: list[str] = field(default_factory=list)
    extra_cuda_cflags: list[str] = field(default_factory=list)
    extra_ldflags: list[str] = field(default_factory=list)

    def key(self, salt: str = "") -> str:
        blob = json.dumps({**asdict(self), "salt": salt}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


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


class _Unresolved(Exception):
    pass


def _module_bindings(tree: ast.Module) -> dict[str, ast.AST]:
    env: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            env[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            env[node.target.id] = node.value
    return env


def _literal(node: ast.AST, env: dict[str, ast.AST], depth: int = 0) -> Any:
    if depth > 20:
        raise _Unresolved("too deep")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return _literal(env[node.id], env, depth + 1)
        raise _Unresolved(f"name {node.id!r} is not a module-level literal")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, env, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k, env, depth + 1): _literal(v, env, depth + 1) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal(node.left, env, depth + 1) + _literal(node.right, env, depth + 1)
    raise _Unresolved(f"{type(node).__name__} is not a static literal")


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _as_list(v: Any) -> list:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


def spec_from_load_inline(kw: dict[str, Any], backend: str) -> BuildSpec:
    """The BuildSpec for a ``load_inline(**kw)`` call (also used at runtime in the worker)."""
    cpp = "\n".join(_as_list(kw.get("cpp_sources")))
    cuda = "\n".join(_as_list(kw.get("cuda_sources")))
    srcs = {"cpp_sources.cpp": cpp}
    if cuda.strip():
        srcs["cuda_sources.cu"] = cuda
    fns = kw.get("functions")
    if isinstance(fns, dict):
        fns = list(fns)
    return BuildSpec(name=str(kw.get("name", "ext")), kind="torch", backend=("cuda" if cuda.strip() else backend),
                     sources=srcs, functions=_as_list(fns) or None,
                     extra_cflags=_as_list(kw.get("extra_cflags")), extra_cuda_cflags=_as_list(kw.get("extra_cuda_cflags")),
                     extra_ldflags=_as_list(kw.get("extra_ldflags")))


def spec_from_load_c(kw: dict[str, Any], backend: str = "cpu") -> BuildSpec:
    srcs = kw.get("sources")
    if srcs is None:
        srcs = {"source.cpp": kw.get("source", "")}
    return BuildSpec(name=str(kw.get("name", "ext")), kind="c", backend=backend, sources=dict(srcs),
                     extra_cflags=_as_list(kw.get("extra_cflags")), extra_ldflags=_as_list(kw.get("extra_ldflags")))


_LOAD_INLINE_POS = ["name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
                    "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags"]
_LOAD_C_POS = ["name", "source", "extra_cflags", "extra_ldflags"]


def extract_specs(src: str, backend: str = "cpu") -> tuple[list[BuildSpec], list[Finding]]:
    """Find ``load_inline``/``load_c`` calls in a solution and evaluate their (static) arguments."""
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return [], [Finding("syntax_error", e.msg, "error", f"line {e.lineno}")]
    env = _module_bindings(tree)
    specs, findings = [], []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = _call_name(node)
        if fname not in ("load_inline", "load_c"):
            continue
        pos = _LOAD_INLINE_POS if fname == "load_inline" else _LOAD_C_POS
        try:
            kw = {pos[i]: _literal(a, env) for i, a in enumerate(node.args)}
            for k in node.keywords:
                if k.arg in ("verbose", "with_cuda", "build_directory", "is_python_module", "with_pytorch_error_handling", "use_pch", "keep_intermediates"):
                    continue
                if k.arg is None:
                    raise _Unresolved("**kwargs")
                kw[k.arg] = _literal(k.value, env)
        except _Unresolved as e:
            findings.append(Finding("dynamic_sources", f"{fname}() argument: {e}", "error", f"line {node.lineno}"))
            continue
        specs.append(spec_from_load_inline(kw, backend) if fname == "load_inline" else spec_from_load_c(kw, backend))
    return specs, findings


def _uses_torch(text: str) -> bool:
    return any(s in text for s in ("PYBIND11_MODULE", "TORCH_LIBRARY", "<torch/", "<ATen/", "\"torch/"))


def load_solution(path: str | Path, backend: str = "cpu") -> Solution:
    """Read a solution file or workspace directory (nothing is executed)."""
    p = Path(path)
    if p.is_dir():
        mn = p / "model_new.py"
        if not mn.is_file():
            raise ShiftkitError(f"workspace {p} has no model_new.py")
        sources: dict[str, str] = {}
        exts = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".c")
        for f in sorted(p.rglob("*")):
            if f.is_file() and f.suffix in exts and "build" not in f.relative_to(p).parts:
                sources[str(f.relative_to(p))] = f.read_text()
        specs = []
        if sources:
            kind = "torch" if any(_uses_torch(t) for t in sources.values()) else "c"
            be = "cuda" if any(k.endswith((".cu", ".cuh")) for k in sources) else backend
            specs.append(BuildSpec(name="kernel_ext", kind=kind, backend=be, sources=sources))
        src = mn.read_text()
        more, findings = extract_specs(src, backend)
        pys = {str(f.relative_to(p)): f.read_text(errors="replace") for f in sorted(p.rglob("*.py"))
               if f.is_file() and "build" not in f.relative_to(p).parts and f != mn}
        for rel, text in pys.items():  # load_inline/load_c in helper modules are built like model_new's
            s2, f2 = extract_specs(text, backend)
            more += s2
            findings += [dataclasses.replace(x, where=f"{rel} {x.where or ''}".strip()) for x in f2]
        return Solution(p.resolve(), src, "model_new.py", "workspace", specs + more, findings, backend, pys)
    if not p.is_file():
        raise ShiftkitError(f"solution not found: {p} (pass a .py file or a workspace directory)")
    src = p.read_text()
    specs, findings = extract_specs(src, backend)
    return Solution(p.resolve(), src, p.name, "file", specs, findings, backend)
