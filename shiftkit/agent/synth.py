"""Task synthesis (``shiftkit agent synth``): compose torch operators into KernelBench-format problems
and keep the ones that pass CUDA Agent's rubric filters.

1. **Catalogue** (:func:`mine_torch_ops`, :data:`CATALOGUE`): ``torch.nn`` module classes and
   ``torch.nn.functional`` callables are mined by introspection; every mined name that has an argument
   and shape sampler here becomes an operator (the mined-but-uncovered ones are listed in the summary).
   Each operator alone is a valid depth-1 problem.
2. **Composition** (:func:`compose`): 1-5 operators applied sequentially, each sampled to accept the
   current shape (a ``Flatten`` bridges 3-D/4-D to 2-D), rendered as KernelBench source (``Model``,
   ``get_inputs``, ``get_init_inputs`` and a ``SHAPE_VARIANTS`` batch change). Deterministic per
   ``(seed, index)``. Optionally a model proposes the operator list (:func:`llm_proposals`, through any
   :mod:`shiftkit.agent.clients` client); its proposals go through the same samplers and filters.
3. **Filters** (:data:`FILTERS`, each ``candidate -> (ok, reason, stats)``), cheapest first:
   ``leak`` (no solution in comments, docstrings, strings or names: :func:`lint_leak`), ``stochastic`` (AST scan of ``Model`` + a twice-run check), ``eager`` (runs, finite output),
   ``degenerate`` (not all-zero / constant / input-insensitive within ``degenerate_tol``),
   ``similarity`` (AST similarity to every evaluation problem < 0.9), ``runtime`` (eager median within
   ``[min_ms, max_ms]`` on this CPU, 1 thread) and ``compile`` (``torch.compile`` runs and matches eager;
   cached by source hash, inductor cache under ``.cache/``).
4. **Output**: ``<out>/dataset.jsonl`` (code, ops, depth, data_source ``torch#<depth>``, provenance,
   filter stats), ``rejected.jsonl`` (with the filter and reason), ``summary.json`` and optionally one
   ``problems/<id>.py`` per admitted task (ready for ``agent run`` / ``agent bench``).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import json
import math
import os
import random
import re
import time
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shiftkit.errors import ShiftkitError

# ----------------------------------------------------------------------------- catalogue

Shape = tuple[int, ...]


@dataclass
class OpInstance:
    init: str | None  # module constructor source ("nn.Linear(256, 128)") or None for functional ops
    call: str  # forward expression; "{x}" is the input, "{m}" the module attribute
    out: Shape


@dataclass
class OpSpec:
    name: str  # the mined torch name: "nn.ReLU", "F.softmax", "torch.clamp"
    ranks: tuple[int, ...]  # input ranks it accepts
    sample: Callable[[random.Random, Shape], OpInstance | None]
    stochastic: bool = False
    weight: float = 1.0


def _mod(ctor: str, out_fn=lambda s: s) -> Callable:
    return lambda r, s: OpInstance(ctor, "{m}({x})", out_fn(s))


def _fn(expr: str) -> Callable:
    return lambda r, s: OpInstance(None, expr, s)


def _linear(r, s):
    o = r.choice([64, 128, 256, 512])
    return OpInstance(f"nn.Linear({s[-1]}, {o})", "{m}({x})", (*s[:-1], o))


def _reduce(fn):
    return lambda r, s: OpInstance(None, f"torch.{fn}({{x}}, dim=-1, keepdim=True)", (*s[:-1], 1))


def _conv2d(r, s):
    o, k = r.choice([8, 16, 32]), r.choice([1, 3, 5])
    return OpInstance(f"nn.Conv2d({s[1]}, {o}, {k}, padding={k // 2})", "{m}({x})", (s[0], o, s[2], s[3]))


def _convT2d(r, s):
    if s[2] > 48:
        return None
    o = r.choice([4, 8, 16])
    return OpInstance(f"nn.ConvTranspose2d({s[1]}, {o}, 2, stride=2)", "{m}({x})", (s[0], o, 2 * s[2], 2 * s[3]))


def _conv1d(r, s):
    o, k = r.choice([8, 16, 32]), r.choice([3, 5])
    return OpInstance(f"nn.Conv1d({s[1]}, {o}, {k}, padding={k // 2})", "{m}({x})", (s[0], o, s[2]))


def _pool(kind, dims):
    def f(r, s):
        if min(s[2:]) < 4:
            return None
        return OpInstance(f"nn.{kind}{dims}d(2)", "{m}({x})", (*s[:2], *(d // 2 for d in s[2:])))
    return f


def _group_norm(r, s):
    g = next((g for g in (8, 4, 2) if s[1] % g == 0), None)
    return None if g is None else OpInstance(f"nn.GroupNorm({g}, {s[1]})", "{m}({x})", s)


def _flatten(r, s):
    return OpInstance("nn.Flatten()", "{m}({x})", (s[0], math.prod(s[1:]))) if math.prod(s[1:]) <= 65536 else None


def _glu(r, s):
    return OpInstance("nn.GLU(dim=-1)", "{m}({x})", (*s[:-1], s[-1] // 2)) if s[-1] % 2 == 0 and s[-1] >= 4 else None


ANY = (2, 3, 4)
_ACTS = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "ELU", "SELU", "CELU", "Mish", "Hardswish", "Hardsigmoid",
         "Softsign", "Tanhshrink", "LogSigmoid", "ReLU6", "Softplus", "Hardtanh"]
CATALOGUE: dict[str, OpSpec] = {}


def _add(spec: OpSpec) -> None:
    CATALOGUE[spec.name] = spec


for _a in _ACTS:
    _add(OpSpec(f"nn.{_a}", ANY, _mod(f"nn.{_a}()")))
_add(OpSpec("nn.LeakyReLU", ANY, lambda r, s: OpInstance(f"nn.LeakyReLU({r.choice([0.01, 0.1, 0.2])})", "{m}({x})", s)))
_add(OpSpec("nn.Linear", (2, 3), _linear, weight=3.0))
_add(OpSpec("nn.LayerNorm", (2, 3), lambda r, s: OpInstance(f"nn.LayerNorm({s[-1]})", "{m}({x})", s), weight=1.5))
_add(OpSpec("nn.RMSNorm", (2, 3), lambda r, s: OpInstance(f"nn.RMSNorm({s[-1]})", "{m}({x})", s)))
_add(OpSpec("nn.Softmax", ANY, _mod("nn.Softmax(dim=-1)")))
_add(OpSpec("nn.LogSoftmax", ANY, _mod("nn.LogSoftmax(dim=-1)")))
_add(OpSpec("nn.GLU", (2, 3), _glu))
_add(OpSpec("F.normalize", ANY, _fn("F.normalize({x}, dim=-1)")))
_add(OpSpec("torch.clamp", ANY, lambda r, s: OpInstance(None, f"torch.clamp({{x}}, min={-r.choice([0.5, 1.0, 2.0])}, max={r.choice([0.5, 1.0, 2.0])})", s)))
_add(OpSpec("torch.mul", ANY, lambda r, s: OpInstance(None, f"torch.mul({{x}}, {r.choice([0.5, 2.0, 1.5, -1.0])})", s)))
_add(OpSpec("torch.add", ANY, lambda r, s: OpInstance(None, f"torch.add({{x}}, {r.choice([0.1, 1.0, -0.5])})", s)))
_add(OpSpec("torch.abs", ANY, _fn("torch.abs({x})")))
_add(OpSpec("torch.square", ANY, _fn("torch.square({x})")))
_add(OpSpec("torch.cumsum", ANY, _fn("torch.cumsum({x}, dim=-1)")))
_add(OpSpec("torch.sum", ANY, _reduce("sum")))
_add(OpSpec("torch.mean", ANY, _reduce("mean")))
_add(OpSpec("torch.amax", ANY, _reduce("amax")))
_add(OpSpec("torch.logsumexp", ANY, _reduce("logsumexp")))
_add(OpSpec("nn.Conv2d", (4,), _conv2d, weight=3.0))
_add(OpSpec("nn.ConvTranspose2d", (4,), _convT2d))
_add(OpSpec("nn.BatchNorm2d", (4,), lambda r, s: OpInstance(f"nn.BatchNorm2d({s[1]})", "{m}({x})", s)))
_add(OpSpec("nn.GroupNorm", (3, 4), _group_norm))
_add(OpSpec("nn.InstanceNorm2d", (4,), lambda r, s: OpInstance(f"nn.InstanceNorm2d({s[1]})", "{m}({x})", s)))
_add(OpSpec("nn.MaxPool2d", (4,), _pool("MaxPool", 2)))
_add(OpSpec("nn.AvgPool2d", (4,), _pool("AvgPool", 2)))
_add(OpSpec("nn.AdaptiveAvgPool2d", (4,), lambda r, s: OpInstance("nn.AdaptiveAvgPool2d(1)", "{m}({x})", (*s[:2], 1, 1))))
_add(OpSpec("nn.Upsample", (4,), lambda r, s: OpInstance("nn.Upsample(scale_factor=2, mode='nearest')", "{m}({x})", (*s[:2], 2 * s[2], 2 * s[3])) if s[2] <= 32 else None))
_add(OpSpec("nn.Conv1d", (3,), _conv1d, weight=2.0))
_add(OpSpec("nn.BatchNorm1d", (3,), lambda r, s: OpInstance(f"nn.BatchNorm1d({s[1]})", "{m}({x})", s)))
_add(OpSpec("nn.MaxPool1d", (3,), _pool("MaxPool", 1)))
_add(OpSpec("nn.AvgPool1d", (3,), _pool("AvgPool", 1)))
_add(OpSpec("nn.Flatten", (3, 4), _flatten))
# stochastic operators exist in torch and in LLM proposals; the stochastic filter must remove them
_add(OpSpec("nn.Dropout", ANY, lambda r, s: OpInstance(f"nn.Dropout({r.choice([0.1, 0.2, 0.5])})", "{m}({x})", s), stochastic=True, weight=0.3))
_add(OpSpec("nn.RReLU", ANY, _mod("nn.RReLU()"), stochastic=True, weight=0.2))
_add(OpSpec("F.dropout", ANY, _fn("F.dropout({x}, p=0.1, training=True)"), stochastic=True, weight=0.2))

STOCHASTIC_NAMES = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "RReLU",
                    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu",
                    "gumbel_softmax", "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm",
                    "bernoulli", "multinomial", "normal", "poisson", "normal_", "uniform_", "exponential_", "bernoulli_",
                    "geometric_", "cauchy_", "log_normal_", "random_"}


def mine_torch_ops() -> dict:
    """Introspect torch: public ``nn.Module`` subclasses in ``torch.nn`` and public callables in
    ``torch.nn.functional``; report which have a sampler (are in :data:`CATALOGUE`)."""
    import inspect

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    modules = sorted(n for n in dir(nn) if not n.startswith("_") and inspect.isclass(getattr(nn, n))
                     and issubclass(getattr(nn, n), nn.Module) and n not in ("Module", "ModuleList", "ModuleDict",
                                                                              "Sequential", "ParameterList", "ParameterDict", "Container"))
    functional = sorted(n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n))
                        and getattr(getattr(F, n), "__module__", "").startswith(("torch.nn.functional", "torch._C")))
    covered = sorted(CATALOGUE)
    mined = {f"nn.{n}" for n in modules} | {f"F.{n}" for n in functional}
    return {"torch": torch.__version__, "nn_modules": len(modules), "functional": len(functional),
            "covered": covered, "covered_mined": sorted(c for c in covered if c in mined),
            "uncovered_examples": sorted(mined - set(covered))[:40],
            "stochastic_mined": sorted(n for n in mined if n.split(".")[-1] in STOCHASTIC_NAMES)}


# ----------------------------------------------------------------------------- composition

@dataclass
class Candidate:
    id: str
    code: str
    ops: list[str]
    depth: int
    provenance: dict
    stats: dict = field(default_factory=dict)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()[:16]


def _start_shape(r: random.Random, rank: int) -> tuple[Shape, list[str]]:
    if rank == 2:
        return (r.choice([64, 128, 256]), r.choice([512, 1024, 2048])), ["batch_size", "features"]
    if rank == 3:
        return (r.choice([16, 32]), r.choice([16, 32, 64]), r.choice([256, 512, 1024])), ["batch_size", "channels", "length"]
    hw = r.choice([32, 48, 64])
    return (r.choice([8, 16]), r.choice([3, 8, 16]), hw, hw), ["batch_size", "channels", "height", "width"]


def render_problem(ops: list[tuple[str, OpInstance]], shape: Shape, dims: list[str], doc: str) -> str:
    inits = [f"        self.op{i} = {inst.init}" for i, (_, inst) in enumerate(ops) if inst.init]
    body = [f"        x = {inst.call.format(x='x', m=f'self.op{i}')}" for i, (_, inst) in enumerate(ops)]
    consts = "\n".join(f"{d} = {v}" for d, v in zip(dims, shape))
    return (f'"""{doc}"""\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n'
            f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + ("\n".join(inits) + "\n" if inits else "        pass\n")
            + "\n    def forward(self, x):\n" + "\n".join(body) + "\n        return x\n\n\n"
            + f"{consts}\nSHAPE_VARIANTS = [{{\"batch_size\": 3}}]\n\n\n"
            + f"def get_inputs():\n    return [torch.randn({', '.join(dims)})]\n\n\n"
            + "def get_init_inputs():\n    return []\n")


def compose(seed: int, index: int, depth: int, names: list[str] | None = None, allow_stochastic: bool = True,
            generator: str = "combinatorial") -> Candidate | None:
    """One problem from ``depth`` operators (sampled, or the given ``names`` in order). Deterministic for
    ``(seed, index)``; None when the names cannot be applied to any start shape."""
    r = random.Random(f"synth:{seed}:{index}")
    if names is not None:
        first = CATALOGUE.get(names[0]) if names else None
        if first is None:
            return None
        ranks = list(first.ranks)
    else:
        ranks = [2, 2, 3, 4, 4]
    for _attempt in range(20):
        shape, dims = _start_shape(r, r.choice(ranks))
        start, s = shape, shape
        ops: list[tuple[str, OpInstance]] = []
        ok = True
        for k in range(depth if names is None else len(names)):
            if names is not None:
                spec = CATALOGUE.get(names[k])
                cands = [spec] if spec and len(s) in spec.ranks else []
            else:
                cands = [c for c in CATALOGUE.values() if len(s) in c.ranks and (allow_stochastic or not c.stochastic)]
            inst = None
            for _ in range(10):
                if not cands:
                    break
                spec = r.choices(cands, weights=[c.weight for c in cands])[0]
                inst = spec.sample(r, s)
                if inst is not None:
                    break
            if inst is None:
                ok = False
                break
            ops.append((spec.name, inst))
            s = inst.out
        if ok:
            names_ = [n for n, _ in ops]
            doc = f"Synthesized ({generator}, seed {seed}, #{index}): " + " -> ".join(names_)
            code = render_problem(ops, start, dims, doc)
            return Candidate(f"synth_s{seed}_{index:05d}", code, names_, len(ops),
                             {"generator": generator, "seed": seed, "index": index})
        if names is not None and _attempt >= 5:
            return None
    return None


def llm_proposals(client, n: int, seed: int = 0, max_depth: int = 5) -> list[tuple[list[str] | None, str]]:
    """Ask a model (any :mod:`shiftkit.agent.clients` client) for ``n`` operator sequences. Returns
    ``(names or None, raw_text)``; unknown names or unparsable answers give None (rejected later)."""
    from shiftkit.agent.clients import ModelError

    names = ", ".join(sorted(n for n, s in CATALOGUE.items()))
    out = []
    for i in range(n):
        msgs = [{"role": "system", "content": "You design fused GPU/CPU kernel benchmark tasks."},
                {"role": "user", "content": f"Operators: {names}.\nPropose a realistic sequential composition of 1 to "
                                            f"{max_depth} of these operators (proposal #{i}, seed {seed}). "
                                            "Answer with a JSON list of operator names only."}]
        try:
            text = client.chat(msgs, [], 128).message.get("content") or ""
        except ModelError as e:
            out.append((None, f"model_error: {e}"))
            continue
        lo, hi = text.find("["), text.find("]", text.find("["))
        try:
            cand = json.loads(text[lo:hi + 1]) if lo >= 0 and hi > lo else None
        except json.JSONDecodeError:
            cand = None
        ok = isinstance(cand, list) and 1 <= len(cand) <= max_depth and all(isinstance(c, str) and c in CATALOGUE for c in cand)
        out.append((cand if ok else None, text[:300]))
    return out


# ----------------------------------------------------------------------------- filters

@dataclass
class SynthConfig:
    out: str = "runs/synth"
    n: int = 200
    seed: int = 0
    min_depth: int = 1
    max_depth: int = 5
    depth_weights: list[float] = field(default_factory=lambda: [0.15, 0.35, 0.25, 0.15, 0.10])
    allow_stochastic: bool = True  # generate stochastic ops (the filter rejects them), as an LLM would
    min_ms: float = 0.1  # eager runtime window on this CPU, 1 thread (the paper: 1-100 ms on its GPU)
    max_ms: float = 100.0
    runtime_reps: int = 5
    degenerate_tol: float = 1e-2  # CUDA Agent's tolerance: outputs constant within it are rejected
    similarity_threshold: float = 0.9
    eval_set: str = ""  # directory of evaluation problems ("" = the kernel fixtures' problems)
    compile: bool = True
    compile_backend: str = "inductor"  # inductor | aot_eager | eager
    compile_fullgraph: bool = True
    compile_max: int = 0  # compile-check at most this many candidates (0 = all that pass the cheap filters)
    threads: int = 1
    llm_url: str = ""  # OpenAI-compatible endpoint for LLM-assisted proposals
    llm_model: str = "default"
    llm_n: int = 0
    write_problems: bool = True
    overwrite: bool = False

    def validate(self) -> None:
        if not 1 <= self.min_depth <= self.max_depth <= 5:
            raise ShiftkitError("synth: need 1 <= min_depth <= max_depth <= 5")
        if len(self.depth_weights) < self.max_depth:
            raise ShiftkitError(f"synth: depth_weights needs {self.max_depth} entries")
        if self.compile_backend not in ("inductor", "aot_eager", "eager"):
            raise ShiftkitError("synth: compile_backend must be inductor, aot_eager or eager")


def load_module(code: str, name: str = "candidate") -> types.ModuleType:
    mod = types.ModuleType(f"_sk_synth_{name}")
    exec(compile(code, f"<synth {name}>", "exec"), mod.__dict__)  # noqa: S102 - our own generated source
    return mod


def _build(mod, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    return mod.Model(*mod.get_init_inputs()).eval()


def _inputs(mod, seed: int):
    import torch

    torch.manual_seed(seed)
    return list(mod.get_inputs())


def _model_class(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


# Words that give away how to solve a task (or that a solution is inside it). A task's text may
# describe the reference computation (its operators), never an implementation of its replacement.
LEAK_WORDS = re.compile(
    r"(?i)(modelnew|solution|answer|hint|fus(?:e|ed|ion|ing|able)|kernel(?!_?bench)|optimi[sz]|speed-?up|fast(?:er|est)?\b|vectori[sz]|"
    r"tiling|tile[ds]?\b|unroll|cuda|triton|load_inline|load_c\b|cpp_extension|extern\s+\"c\"|__global__|#\s*include|"
    r"#\s*pragma|simd|openmp|cublas|cudnn|shared\s+memory)")
# What a solution file uses and a problem never needs: a problem that imports or calls one carries a solution.
LEAK_CODE = ("ModelNew", "load_inline", "load_c", "cpp_extension", "ctypes", "triton", "cffi", "numba")


def _texts(tree: ast.Module, code: str) -> list[tuple[str, int, str]]:
    """(kind, line, text) of every comment, docstring and string constant of a problem source."""
    import io
    import tokenize

    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT:
                out.append(("comment", tok.start[0], tok.string))
    except (tokenize.TokenError, IndentationError):
        pass
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(("string", n.lineno, n.value))
    return out


def _names(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, identifier) of every name the source defines or uses, attributes and imports included."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((n.lineno, n.name))
        elif isinstance(n, ast.Name):
            out.append((n.lineno, n.id))
        elif isinstance(n, ast.Attribute):
            out.append((n.lineno, n.attr))
        elif isinstance(n, ast.arg):
            out.append((n.lineno, n.arg))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out += [(n.lineno, a.asname or a.name) for a in n.names] + ([(n.lineno, n.module)] if getattr(n, "module", None) else [])
    return out


def lint_leak(code: str) -> list[str]:
    """Pure: why a task's source leaks a solution (empty when clean). Checks every comment, docstring and
    string constant against :data:`LEAK_WORDS`, every identifier (classes, functions, variables,
    attributes, imports) against the same words, and the solution-only constructs :data:`LEAK_CODE`."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return [f"not Python: {e.msg} (line {e.lineno})"]
    why = []
    for kind, line, text in _texts(tree, code):
        m = LEAK_WORDS.search(text)
        if m:
            why.append(f"{kind} at line {line} says {m.group(0)!r}")
    for line, name in _names(tree):
        parts = set(name.split("."))
        if parts & set(LEAK_CODE):
            why.append(f"line {line} uses {name!r}, which only a solution needs")
            continue
        m = LEAK_WORDS.search(name.replace("_", " "))
        if m:
            why.append(f"name {name!r} at line {line} says {m.group(0)!r}")
    return list(dict.fromkeys(why))


def filter_leak(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """The task does not leak a solution in comments, docstrings, strings or names (:func:`lint_leak`)."""
    why = lint_leak(c.code)
    return (False, "leaks a solution: " + "; ".join(why[:3]), {}) if why else (True, "", {})


def filter_stochastic(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """No stochastic operator inside ``Model`` (AST names), and two train-mode runs on the same input agree."""
    import torch

    cls = _model_class(ast.parse(c.code))
    if cls is None:
        return False, "no Model class", {}
    for node in ast.walk(cls):
        nm = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if nm in STOCHASTIC_NAMES:
            return False, f"stochastic operator {nm} in Model", {}
    try:
        mod = load_module(c.code, c.hash)
        m = _build(mod).train()
        x = _inputs(mod, 0)
        with torch.no_grad():
            a, b = m(*x), m(*x)
    except Exception as e:  # noqa: BLE001 - the eager filter reports crashes
        return True, "", {"stochastic_check": f"skipped: {type(e).__name__}"}
    if not torch.equal(a, b):
        return False, "two train-mode runs on the same input differ", {}
    return True, "", {}


def filter_eager(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """Imports, builds and runs in eager mode; the output is a finite floating tensor."""
    import torch

    try:
        mod = load_module(c.code, c.hash)
        with torch.no_grad():
            out = _build(mod)(*_inputs(mod, 0))
    except Exception as e:  # noqa: BLE001
        return False, f"eager run failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", {}
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return False, f"output is not a floating tensor ({type(out).__name__})", {}
    if not torch.isfinite(out).all():
        return False, "output has NaN/inf", {}
    return True, "", {"out_shape": list(out.shape)}


def filter_degenerate(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """Output not all-zero, not a single constant, and changes with the inputs (within ``degenerate_tol``)."""
    import torch

    from shiftkit.kernels.correctness import degeneracy, same_outputs

    mod = load_module(c.code, c.hash)
    m = _build(mod)
    with torch.no_grad():
        a, b = m(*_inputs(mod, 1)), m(*_inputs(mod, 2))
    tol = cfg.degenerate_tol
    d = degeneracy(a, tol, tol)
    if d:
        return False, f"output is {d.replace('_', '-')} within {tol:g}", {}
    if same_outputs(a, b, tol, tol):
        return False, f"output does not change with the inputs (within {tol:g})", {}
    return True, "", {"out_std": float(a.float().std())}


def filter_runtime(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """Eager median runtime (``runtime_reps`` calls after one warm-up, 1 thread) within ``[min_ms, max_ms]``."""
    import torch

    mod = load_module(c.code, c.hash)
    m, x = _build(mod), _inputs(mod, 0)
    prev = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        ts = []
        with torch.no_grad():
            m(*x)
            for _ in range(cfg.runtime_reps):
                t = time.perf_counter()
                m(*x)
                ts.append((time.perf_counter() - t) * 1e3)
    finally:
        torch.set_num_threads(prev)
    ms = sorted(ts)[len(ts) // 2]
    if not cfg.min_ms <= ms <= cfg.max_ms:
        return False, f"eager runtime {ms:.3f} ms outside [{cfg.min_ms:g}, {cfg.max_ms:g}] ms", {"eager_ms": ms}
    return True, "", {"eager_ms": ms}


def ast_tokens(src: str) -> list[str]:
    """Structure of a source as a token list: node types in DFS order, attribute and called names kept,
    identifiers and constants abstracted (so renaming variables or changing sizes does not hide a copy)."""
    toks: list[str] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.Expr,)) and isinstance(getattr(n, "value", None), ast.Constant) and isinstance(n.value.value, str):
            return  # docstrings
        toks.append(type(n).__name__)
        if isinstance(n, ast.Attribute):
            toks.append("." + n.attr)
        elif isinstance(n, ast.Name) and n.id in ("torch", "nn", "F"):
            toks.append(n.id)
        for ch in ast.iter_child_nodes(n):
            if not isinstance(ch, (ast.Load, ast.Store, ast.Del)):
                visit(ch)

    visit(ast.parse(src))
    return toks


def ast_similarity(a: str, b: str) -> float:
    """Pure: ``difflib`` ratio of the two AST token sequences, in [0, 1]."""
    return difflib.SequenceMatcher(None, ast_tokens(a), ast_tokens(b), autojunk=False).ratio()


_EVAL_CACHE: dict[str, list[tuple[str, list[str]]]] = {}


def eval_set_tokens(eval_dir: str) -> list[tuple[str, list[str]]]:
    from shiftkit.kernels.fixtures import PROBLEMS

    d = Path(eval_dir) if eval_dir else PROBLEMS
    if str(d) not in _EVAL_CACHE:
        if not d.is_dir():
            raise ShiftkitError(f"synth: eval_set {d} is not a directory of problem files")
        _EVAL_CACHE[str(d)] = [(p.stem, ast_tokens(p.read_text())) for p in sorted(d.rglob("*.py")) if p.name != "__init__.py"]
    return _EVAL_CACHE[str(d)]


def filter_similarity(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """AST similarity to every evaluation problem below ``similarity_threshold`` (decontamination)."""
    toks = ast_tokens(c.code)
    best, name = 0.0, None
    for stem, et in eval_set_tokens(cfg.eval_set):
        sm = difflib.SequenceMatcher(None, toks, et, autojunk=False)
        if sm.real_quick_ratio() < best or sm.quick_ratio() < best:
            continue
        s = sm.ratio()
        if s > best:
            best, name = s, stem
    stats = {"max_similarity": round(best, 4), "nearest_eval": name}
    if best >= cfg.similarity_threshold:
        return False, f"AST similarity {best:.3f} >= {cfg.similarity_threshold:g} to eval problem {name}", stats
    return True, "", stats


def _compile_cache_path(c: Candidate, cfg: SynthConfig) -> Path:
    import torch

    key = hashlib.sha256(f"{c.code}|{cfg.compile_backend}|{cfg.compile_fullgraph}|{torch.__version__}".encode()).hexdigest()[:20]
    return Path(os.environ.get("SHIFTKIT_SYNTH_CACHE", ".cache/synth")).resolve() / "compile" / f"{key}.json"


def filter_compile(c: Candidate, cfg: SynthConfig) -> tuple[bool, str, dict]:
    """``torch.compile(model, backend, fullgraph)`` runs and matches eager (atol=rtol=1e-3); cached by source hash."""
    path = _compile_cache_path(c, cfg)
    if path.is_file():
        d = json.loads(path.read_text())
        return d["ok"], d["reason"], d["stats"] | {"compile_cached": True}
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(".cache/inductor").resolve()))
    import torch

    mod = load_module(c.code, c.hash)
    m, x = _build(mod), _inputs(mod, 0)
    t = time.perf_counter()
    try:
        torch._dynamo.reset()
        cm = torch.compile(m, backend=cfg.compile_backend, fullgraph=cfg.compile_fullgraph)
        with torch.no_grad():
            got, want = cm(*x), m(*x)
        ok = torch.allclose(got, want, atol=1e-3, rtol=1e-3)
        reason = "" if ok else f"torch.compile output differs from eager (max {float((got - want).abs().max()):.3g})"
    except Exception as e:  # noqa: BLE001
        ok, reason = False, f"torch.compile failed: {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    stats = {"compile_s": round(time.perf_counter() - t, 3), "compile_backend": cfg.compile_backend}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ok": ok, "reason": reason, "stats": stats}))
    return ok, reason, stats | {"compile_cached": False}


FILTERS: dict[str, Callable[[Candidate, SynthConfig], tuple[bool, str, dict]]] = {
    "leak": filter_leak, "stochastic": filter_stochastic, "eager": filter_eager, "degenerate": filter_degenerate,
    "similarity": filter_similarity, "runtime": filter_runtime, "compile": filter_compile,
}


def run_filters(c: Candidate, cfg: SynthConfig, names: list[str] | None = None) -> tuple[str | None, str]:
    """Apply filters in order; returns ``(rejecting filter or None, reason)`` and fills ``c.stats``."""
    for name in names or list(FILTERS):
        t = time.perf_counter()
        ok, reason, stats = FILTERS[name](c, cfg)
        c.stats.update(stats)
        c.stats[f"t_{name}_s"] = round(time.perf_counter() - t, 4)
        if not ok:
            return name, reason
    return None, ""


# ----------------------------------------------------------------------------- the run

def _depth(r: random.Random, cfg: SynthConfig) -> int:
    depths = list(range(cfg.min_depth, cfg.max_depth + 1))
    return r.choices(depths, weights=cfg.depth_weights[cfg.min_depth - 1:cfg.max_depth])[0]


def run_synth(cfg: SynthConfig, client=None, progress: bool = False) -> dict:
    """Generate ``cfg.n`` combinatorial candidates (+ ``llm_n`` model proposals), filter, write the dataset."""
    import shutil

    import torch

    from shiftkit.io import JsonlWriter, atomic_write_json

    cfg.validate()
    out = Path(cfg.out)
    if out.exists() and cfg.overwrite:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    t0 = time.time()
    cands: list[tuple[Candidate | None, str]] = []
    r = random.Random(f"synth-depth:{cfg.seed}")
    for i in range(cfg.n):
        cands.append((compose(cfg.seed, i, _depth(r, cfg), allow_stochastic=cfg.allow_stochastic), ""))
    if cfg.llm_n:
        if client is None:
            from shiftkit.agent.clients import OpenAIClient

            if not cfg.llm_url:
                raise ShiftkitError("synth: llm_n > 0 needs llm_url=<OpenAI-compatible base URL>")
            client = OpenAIClient(cfg.llm_url, cfg.llm_model)
        for j, (names, raw) in enumerate(llm_proposals(client, cfg.llm_n, cfg.seed, cfg.max_depth)):
            c = compose(cfg.seed, 100_000 + j, len(names), names, generator=f"llm:{getattr(client, 'name', 'client')}") if names else None
            cands.append((c, "unparsable or unknown operators: " + raw[:120] if names is None else "operators do not compose"))
    seen: set[str] = set()
    rej = Counter()
    per_depth: dict[int, Counter] = {}
    compile_checked = 0
    ds = JsonlWriter(out / "dataset.jsonl", append=False)
    rj = JsonlWriter(out / "rejected.jsonl", append=False)
    if cfg.write_problems:
        (out / "problems").mkdir(exist_ok=True)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cands), desc="synth", leave=False)
    for k, (c, why) in enumerate(cands):
        if bar:
            bar.update(1)
        if c is None:
            rej["proposal"] += 1
            rj.write({"index": k, "filter": "proposal", "reason": why or "could not compose"})
            continue
        dc = per_depth.setdefault(c.depth, Counter())
        dc["generated"] += 1
        if c.hash in seen:
            rej["duplicate"] += 1
            rj.write({"id": c.id, "ops": c.ops, "depth": c.depth, "filter": "duplicate", "reason": "same source as an earlier candidate"})
            continue
        seen.add(c.hash)
        names = [n for n in FILTERS if n != "compile"]
        failed, reason = run_filters(c, cfg, names)
        if failed is None and cfg.compile and (cfg.compile_max == 0 or compile_checked < cfg.compile_max):
            compile_checked += 1
            failed, reason = run_filters(c, cfg, ["compile"])
        elif failed is None and cfg.compile:
            c.stats["compile"] = "not checked (compile_max reached)"
        if failed:
            rej[failed] += 1
            rj.write({"id": c.id, "ops": c.ops, "depth": c.depth, "filter": failed, "reason": reason, "stats": c.stats})
            continue
        dc["admitted"] += 1
        ds.write({"id": c.id, "code": c.code, "ops": c.ops, "depth": c.depth, "data_source": f"torch#{c.depth}",
                  "provenance": c.provenance | {"torch": torch.__version__}, "filter_stats": c.stats})
        if cfg.write_problems:
            (out / "problems" / f"{c.id}.py").write_text(c.code)
    if bar:
        bar.close()
    ds.close()
    rj.close()
    admitted = sum(d["admitted"] for d in per_depth.values())
    summary = {"candidates": len(cands), "admitted": admitted, "rejected": dict(sorted(rej.items())),
               "per_depth": {str(d): {"generated": v["generated"], "admitted": v["admitted"]} for d, v in sorted(per_depth.items())},
               "compile_checked": compile_checked, "seconds": round(time.time() - t0, 1),
               "config": dataclasses.asdict(cfg), "catalogue": len(CATALOGUE), "out": str(out)}
    atomic_write_json(out / "summary.json", summary)
    return summary
