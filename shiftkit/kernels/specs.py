"""Build specs and their extraction from a solution's Python (pure; runs in the analysis subprocess).

A solution's kernel sources must be static: computable from literals alone, so the trusted side can build them
before any candidate code runs. :func:`_literal` folds the class of **pure string expressions over literals**:
strings, numbers and their lists/tuples/dicts; names bound once to such an expression (at module level, or in
the function that makes the call); ``+`` and ``%``; f-strings of them (with a literal format spec); the string
methods ``strip``/``lstrip``/``rstrip``/``replace``/``format``/``join``/``upper``/``lower``; and
``textwrap.dedent``/``textwrap.indent``/``inspect.cleandoc``. Nothing is executed: a source that needs anything
else (a file read, a call into the solution's own code) is ``dynamic_sources``.
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
    """Module-level names, in statement order: an assignment binds, ``NAME += expr`` appends to the binding
    (``SRC += "..."``, redteam7 hn14). The source is built from these; the worker builds at runtime only what
    was extracted, so a binding that differs at runtime fails the load, never builds something else."""
    return _sequential_bindings(tree.body, {})


def _bound_now(value: ast.AST, env: dict[str, ast.AST]) -> ast.AST:
    """``value`` with every name already bound in ``env`` replaced by its bound expression: what the statement
    evaluates when it runs, so ``SRC = textwrap.dedent(SRC)`` reads the previous ``SRC`` (redteam8 hn17)."""
    import copy

    class _Sub(ast.NodeTransformer):
        def visit_Name(self, n):
            return env[n.id] if isinstance(n.ctx, ast.Load) and n.id in env else n

    return _Sub().visit(copy.deepcopy(value))


def _sequential_bindings(body: list, outer: dict[str, ast.AST]) -> dict[str, ast.AST]:
    """The names a block of statements run in order binds (a module's or a class body's), over ``outer``: an
    assignment binds its value as evaluated then (:func:`_bound_now`), ``NAME += expr`` appends to the binding
    (``SRC += "..."``, redteam7 hn14)."""
    env: dict[str, ast.AST] = dict(outer)
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            env[node.targets[0].id] = _bound_now(node.value, env)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            env[node.target.id] = _bound_now(node.value, env)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) \
                and node.target.id in env:
            env[node.target.id] = ast.BinOp(left=env[node.target.id], op=ast.Add(), right=_bound_now(node.value, env))
    return env


def _function_bindings(fn: ast.AST) -> dict[str, ast.AST]:
    """Names bound exactly once in a function's body by a plain assignment (its parameters and any name bound
    twice are left out: their value is not one expression)."""
    count: dict[str, int] = {}
    env: dict[str, ast.AST] = {}
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)] \
                if not isinstance(node, ast.With) else [i.optional_vars for i in node.items]
            for t in targets:
                for n in ast.walk(t) if t is not None else ():
                    if isinstance(n, ast.Name):
                        count[n.id] = count.get(n.id, 0) + 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                env[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                env[node.target.id] = node.value
    args = fn.args if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else None
    params = {a.arg for a in (args.posonlyargs + args.args + args.kwonlyargs)} if args else set()
    return {k: v for k, v in env.items() if count.get(k) == 1 and k not in params}


_STR_METHODS = {"strip", "lstrip", "rstrip", "replace", "format", "join", "upper", "lower", "split", "rsplit",
                "splitlines"}
_STR_FUNCS = {("textwrap", "dedent"), ("textwrap", "indent"), ("inspect", "cleandoc"), (None, "dedent"),
              (None, "indent"), (None, "cleandoc")}


def _sized(v: Any) -> Any:
    if isinstance(v, str) and len(v) > MAX_SOURCE_BYTES:
        raise _Unresolved("sources too large")
    return v


def _literal(node: ast.AST, env: dict[str, ast.AST], depth: int = 0) -> Any:
    if depth > 50:
        raise _Unresolved("nested too deeply")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string of literals
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
                continue
            x = _literal(v.value, env, depth + 1)
            if not isinstance(x, (str, int, float, bool)):
                raise _Unresolved("an f-string field is not a string or a number")
            x = repr(x) if v.conversion == ord("r") else ascii(x) if v.conversion == ord("a") else x
            spec = _literal(v.format_spec, env, depth + 1) if v.format_spec is not None else ""
            parts.append(format(x, spec))
        return _sized("".join(parts))
    if isinstance(node, ast.Call):
        f = node.func
        args = [_literal(a, env, depth + 1) for a in node.args]
        kwargs = {k.arg: _literal(k.value, env, depth + 1) for k in node.keywords if k.arg is not None}
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            raise _Unresolved("*args/**kwargs in a source expression")
        if not all(isinstance(a, (str, int, float, bool, list, tuple)) for a in [*args, *kwargs.values()]):
            raise _Unresolved("a source function's argument is not a literal")
        if isinstance(f, ast.Attribute) and f.attr in _STR_METHODS:
            obj = _literal(f.value, env, depth + 1)
            if not isinstance(obj, str):
                raise _Unresolved(f".{f.attr}() on a non-string")
            return _sized(getattr(obj, f.attr)(*args, **kwargs))
        mod = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if (mod, name) in _STR_FUNCS:
            import inspect
            import textwrap

            fn = {"dedent": textwrap.dedent, "indent": textwrap.indent, "cleandoc": inspect.cleandoc}[name]
            if not all(isinstance(a, str) for a in args) or kwargs:
                raise _Unresolved(f"{name}() of a non-string")
            return _sized(fn(*args))
        raise _Unresolved(f"a call to {name or type(f).__name__}() is not a string function of literals")
    if isinstance(node, ast.Name):
        if node.id in env:
            return _literal(env[node.id], env, depth + 1)
        raise _Unresolved(f"name {node.id!r} is not a module-level literal")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, env, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k, env, depth + 1): _literal(v, env, depth + 1) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left, right = _literal(node.left, env, depth + 1), _literal(node.right, env, depth + 1)
        if not isinstance(left, str) or not isinstance(right, (str, int, float, list)):
            raise _Unresolved("only a string may be %-formatted, by literals")
        return _sized(left % (tuple(right) if isinstance(right, list) else right))
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


def _flags(v: Any) -> list:
    """A flag list as the compiler receives it: torch's ``load_inline`` writes each entry into its ninja file's
    command line joined by spaces, so ``"-O3 -march=native"`` is two flags there (redteam8 hn20); split by the
    shell's rules (an entry the shell cannot split stays whole, and the allowlist judges it)."""
    import shlex

    out = []
    for f in _as_list(v):
        try:
            out += shlex.split(f) if isinstance(f, str) else [f]
        except ValueError:
            out.append(f)
    return out


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
                     extra_cflags=_flags(kw.get("extra_cflags")), extra_cuda_cflags=_flags(kw.get("extra_cuda_cflags")),
                     extra_ldflags=_flags(kw.get("extra_ldflags")))


def spec_from_load_c(kw: dict[str, Any], backend: str = "cpu") -> BuildSpec:
    srcs = kw.get("sources")
    if srcs is None:
        srcs = {"source.cpp": kw.get("source", "")}
    return BuildSpec(name=str(kw.get("name", "ext")), kind="c", backend=backend, sources=dict(srcs),
                     extra_cflags=_flags(kw.get("extra_cflags")), extra_ldflags=_flags(kw.get("extra_ldflags")))


_LOAD_INLINE_POS = ["name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
                    "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags"]
_LOAD_C_POS = ["name", "source", "sources", "extra_cflags", "extra_ldflags"]  # runtime.load_c's order (a test checks)


def extract_specs(src: str, backend: str = "cpu") -> tuple[list[BuildSpec], list[Finding]]:
    """Find ``load_inline``/``load_c`` calls in a solution and evaluate their (static) arguments."""
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return [], [Finding("syntax_error", e.msg, "error", f"line {e.lineno}")]
    env = _module_bindings(tree)
    scope: dict[int, dict[str, ast.AST]] = {}  # a call's enclosing function's bindings over the module's
    owner: dict[int, ast.AST] = {}  # a call's innermost enclosing function
    _in_order(tree.body, {}, scope)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local = {**env, **_function_bindings(fn)}
            for n in ast.walk(fn):
                if isinstance(n, ast.Call):
                    scope[id(n)] = local  # the innermost function wins (walked after its outer one)
                    owner[id(n)] = fn
    specs, findings, seen = [], [], set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = _call_name(node)
        if fname not in ("load_inline", "load_c"):
            continue
        env_here = scope.get(id(node), env)
        try:
            kws = [_load_kwargs(node, fname, env_here)]
        except _Unresolved as e:
            # a helper that passes its parameters on (`def _build(name, src): return load_c(name=name, source=src)`):
            # one spec per call of the helper in this file, its arguments literals there (redteam7 hn10)
            fn = owner.get(id(node))
            try:
                kws = [_load_kwargs(node, fname, {**env_here, **b}) for b in _helper_calls(tree, fn, scope, env)] if fn else []
            except _Unresolved as e2:
                e, kws = e2, []
            if not kws:
                findings.append(Finding("dynamic_sources", f"{fname}() argument: {e}", "error", f"line {node.lineno}"))
                continue
        for kw in kws:
            spec = spec_from_load_inline(kw, backend) if fname == "load_inline" else spec_from_load_c(kw, backend)
            if spec.key() not in seen:
                seen.add(spec.key())
                specs.append(spec)
    return specs, findings


def _in_order(body: list, outer: dict[str, ast.AST], scope: dict) -> None:
    """A call in a block that runs in order (the module, a class body, redteam8 hn18) sees the names bound
    before its statement (``A = load_c(source=SRC)`` then ``SRC = ...`` builds the first ``SRC``, redteam8
    hn17); a class body also sees the module's names bound before it. Functions run later: their calls are
    scoped by :func:`extract_specs` (over the module's final names)."""
    env = dict(outer)
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            _in_order(stmt.body, env, scope)
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(stmt):
                if isinstance(n, ast.Call):
                    scope[id(n)] = env
        env = _sequential_bindings([stmt], env)


_IGNORED_KW = ("verbose", "with_cuda", "build_directory", "is_python_module", "with_pytorch_error_handling", "use_pch",
               "keep_intermediates")


def _load_kwargs(node: ast.Call, fname: str, env: dict[str, ast.AST]) -> dict[str, Any]:
    pos = _LOAD_INLINE_POS if fname == "load_inline" else _LOAD_C_POS
    kw = {pos[i]: _literal(a, env) for i, a in enumerate(node.args)}
    for k in node.keywords:
        if k.arg in _IGNORED_KW:
            continue
        if k.arg is None:
            raise _Unresolved("**kwargs")
        kw[k.arg] = _literal(k.value, env)
    return kw


def _helper_calls(tree: ast.Module, fn: ast.AST, scope: dict, env: dict) -> list[dict[str, ast.AST]]:
    """The parameter bindings of every call of the function ``fn`` (by its name) in ``tree``: each argument a
    literal at its call site, a parameter not passed its default; none if ``fn`` is never called by name or
    takes ``*args``/``**kwargs``."""
    a = fn.args
    if a.vararg or a.kwarg:
        return []
    params = [p.arg for p in a.posonlyargs + a.args]
    defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    out = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and _call_name(call) == fn.name and call is not fn):
            continue
        here = scope.get(id(call), env)
        names = params[1:] if isinstance(call.func, ast.Attribute) and params[:1] in (["self"], ["cls"]) else params
        if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords) \
                or len(call.args) > len(names):
            raise _Unresolved(f"{fn.name}() is called with *args/**kwargs")
        bound = {p: ast.Constant(_literal(x, here)) for p, x in zip(names, call.args)}
        bound.update({k.arg: ast.Constant(_literal(k.value, here)) for k in call.keywords})
        for p, d in defaults.items():
            bound.setdefault(p, ast.Constant(_literal(d, env)))
        out.append(bound)
    return out


