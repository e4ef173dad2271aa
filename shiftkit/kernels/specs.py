"""Build specs and their extraction from a solution's Python (pure; runs in the analysis subprocess).

A solution's kernel sources must be static literals (strings, names bound to strings, ``+``) in its
``load_inline`` / ``load_c`` calls, so the trusted side can build them before any candidate code runs.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from shiftkit.kernels.findings import Finding

MAX_SOURCE_BYTES = 4 << 20  # all files of a solution together


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
    if depth > 50:
        raise _Unresolved("nested too deeply")
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
        left, right = _literal(node.left, env, depth + 1), _literal(node.right, env, depth + 1)
        if not (isinstance(left, str) and isinstance(right, str)) and not (isinstance(left, list) and isinstance(right, list)):
            raise _Unresolved("only strings and lists may be added")
        if len(left) + len(right) > MAX_SOURCE_BYTES:
            raise _Unresolved("sources too large")
        return left + right
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


