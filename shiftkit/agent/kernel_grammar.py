"""A learning task on the real kernel environment that a tiny policy can solve on a CPU.

No model that trains here can write C++ kernels from scratch, so the policy *composes* one: it emits a
short composition from a small grammar, which :func:`render_solution` turns into a single-file
KernelBench solution (a lean C ABI kernel through ``shiftkit.kernels.runtime.load_c``). The real
environment compiles, verifies and profiles it; the milestone reward {-1, 1, 2, 3} is the real one.

The grammar (one value per slot, always in this order)::

    order=rc|cr  block=0|16|64  vec=none|simd  omp=off|on  variant=exact|drop_op|half_cols

* ``order``: ``rc`` walks each row contiguously; ``cr`` walks columns (strided loads).
* ``block``: square tiles of this many rows and columns (0 = no tiling); tiling makes the strided
  ``cr`` walk cache-friendly.
* ``vec``: ``simd`` puts ``#pragma omp simd`` (with a reduction clause for reductions) on the inner
  loop; without it the compiler may not vectorise a float reduction (no reassociation without it).
* ``omp``: ``#pragma omp parallel for`` on the row (tile) loop when it is the outer loop; the
  environment times with 1 thread, so it mostly costs a little.
* ``variant``: ``exact``, or a wrong-but-fast shortcut: ``drop_op`` skips the nonlinearity (or the
  per-element function of a reduction), ``half_cols`` handles every other column.

Problems (:data:`PROBLEMS`) are KernelBench-format modules of two families over a (rows, cols) fp32
input: ``ew`` = ``g(x * w + b)`` with per-column ``w, b``, and ``red`` = ``alpha * sum_c h(x)``
(keepdim). Train and held-out problems use different functions and shapes (:data:`SPLITS`). The
reduction functions are non-negative (no cancellation), so every exact composition is within the
environment's fp32 tolerance whatever its summation order (a sum of cubes was dropped: its float
accumulation in column order failed the 1e-4 check on cancellation).

Format the policy emits (:func:`format_composition` / :func:`parse_composition`): the five
``slot=value`` words separated by single spaces, e.g. ``order=rc block=0 vec=simd omp=off variant=exact``,
or the compact form, the bare values in slot order (``rc 0 simd off exact``: every value word is
unique, 19-25 characters for the character-level tiny models).
:data:`VOCAB` lists the ten slot words and the value words, for a word-level tokenizer.
:func:`prompt_for` is the policy's prompt; :func:`sft_rows` gives SFT data of random valid
compositions (chat rows); :func:`grammar_reward` is a TRL-signature reward on that format.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass

SLOTS: dict[str, tuple[str, ...]] = {
    "order": ("rc", "cr"),
    "block": ("0", "16", "64"),
    "vec": ("none", "simd"),
    "omp": ("off", "on"),
    "variant": ("exact", "drop_op", "half_cols"),
}
VOCAB: tuple[str, ...] = tuple(f"{k}=" for k in SLOTS) + tuple(dict.fromkeys(v for vs in SLOTS.values() for v in vs))


@dataclass(frozen=True)
class Composition:
    order: str = "rc"
    block: str = "0"
    vec: str = "none"
    omp: str = "off"
    variant: str = "exact"

    def __post_init__(self):
        for k, vals in SLOTS.items():
            if getattr(self, k) not in vals:
                raise ValueError(f"{k}={getattr(self, k)!r} is not one of {', '.join(vals)}")


def all_compositions() -> list[Composition]:
    return [Composition(*vals) for vals in itertools.product(*SLOTS.values())]


def random_composition(rng: random.Random) -> Composition:
    return Composition(*(rng.choice(v) for v in SLOTS.values()))


def format_composition(c: Composition, compact: bool = False) -> str:
    """``order=rc block=0 vec=simd omp=off variant=exact``, or with ``compact`` the bare values in slot
    order, ``rc 0 simd off exact`` (19-25 characters: what a character-level tiny policy emits)."""
    return " ".join(getattr(c, k) if compact else f"{k}={getattr(c, k)}" for k in SLOTS)


def parse_composition(text: str) -> Composition:
    """The composition in ``text``: the first non-empty line, as ``slot=value`` words or bare values in
    slot order. Raises ValueError with a one-line reason."""
    line = next((ln.strip() for ln in str(text).strip().splitlines() if ln.strip()), "")
    words = line.split()
    if len(words) != len(SLOTS):
        raise ValueError(f"expected {len(SLOTS)} words ({' '.join(f'{k}=' for k in SLOTS)}, or the bare values), "
                         f"got {len(words)}")
    vals = {}
    for w, k in zip(words, SLOTS):
        key, eq, val = w.partition("=")
        if not eq:
            key, val = k, w
        if key != k:
            raise ValueError(f"expected slot {k!r} at position {list(SLOTS).index(k) + 1}, got {key!r}")
        vals[k] = val
    return Composition(**vals)


# ----------------------------------------------------------------------------- problems

EW_FUNCS = {  # name -> (torch expression of v, C expression of v, doc)
    "clamp": ("torch.clamp(v, -1.0, 1.0)", "(v < -1.f ? -1.f : (v > 1.f ? 1.f : v))", "clamp to [-1, 1]"),
    "relu": ("torch.relu(v)", "(v > 0.f ? v : 0.f)", "ReLU"),
    "leaky": ("torch.where(v > 0, v, 0.1 * v)", "(v > 0.f ? v : 0.1f * v)", "leaky ReLU (0.1)"),
    "relu6": ("torch.clamp(v, 0.0, 6.0)", "(v < 0.f ? 0.f : (v > 6.f ? 6.f : v))", "ReLU6"),
    "hardtanh2": ("torch.clamp(v, -2.0, 2.0)", "(v < -2.f ? -2.f : (v > 2.f ? 2.f : v))", "clamp to [-2, 2]"),
}
RED_FUNCS = {
    "sumsq": ("(x * x)", "(v * v)", "sum of squares"),
    "sumabs": ("x.abs()", "(v < 0.f ? -v : v)", "sum of absolute values"),
    "sumrelu": ("torch.relu(x)", "(v > 0.f ? v : 0.f)", "sum of ReLU"),
    "sumsqrelu": ("(torch.relu(x) * torch.relu(x))", "(v > 0.f ? v * v : 0.f)", "sum of squared ReLU"),
}


@dataclass(frozen=True)
class GProblem:
    name: str
    family: str  # ew | red
    func: str
    rows: int
    cols: int

    @property
    def doc(self) -> str:
        f = (EW_FUNCS if self.family == "ew" else RED_FUNCS)[self.func][2]
        return (f"y = {f}(x * w + b), per-column w, b" if self.family == "ew" else f"y = alpha * row-wise {f}") + \
            f"; x is ({self.rows}, {self.cols}) fp32"

    def source(self) -> str:
        """The KernelBench-format problem file."""
        if self.family == "ew":
            t = EW_FUNCS[self.func][0]
            model = ("class Model(nn.Module):\n    def __init__(self, features: int):\n        super().__init__()\n"
                     "        self.weight = nn.Parameter(torch.randn(features) * 0.5)\n"
                     "        self.bias = nn.Parameter(torch.randn(features) * 0.5)\n\n"
                     f"    def forward(self, x):\n        v = x * self.weight + self.bias\n        return {t}\n")
            init = "[cols]"
        else:
            t = RED_FUNCS[self.func][0]
            model = ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "        self.alpha = nn.Parameter(torch.tensor(0.5))\n\n"
                     f"    def forward(self, x):\n        return {t}.sum(dim=1, keepdim=True) * self.alpha\n")
            init = "[]"
        return (f'"""{self.doc}."""\n\nimport torch\nimport torch.nn as nn\n\n\n{model}\n\n'
                f"rows = {self.rows}\ncols = {self.cols}\nSHAPE_VARIANTS = [{{\"rows\": 37}}]\n\n\n"
                "def get_inputs():\n    return [torch.randn(rows, cols)]\n\n\n"
                f"def get_init_inputs():\n    return {init}\n")


def _p(family: str, func: str, rows: int, cols: int) -> GProblem:
    return GProblem(f"g_{family}_{func}_{rows}x{cols}", family, func, rows, cols)


PROBLEMS: dict[str, GProblem] = {p.name: p for p in (
    _p("ew", "clamp", 1024, 1024), _p("ew", "relu", 1024, 1024), _p("ew", "leaky", 768, 1024),
    _p("red", "sumsq", 1024, 1024), _p("red", "sumabs", 768, 1024),
    # held out: other functions and shapes
    _p("ew", "relu6", 1024, 768), _p("ew", "hardtanh2", 512, 1536),
    _p("red", "sumrelu", 1024, 768), _p("red", "sumsqrelu", 512, 1536),
)}
SPLITS = {"train": [n for n in PROBLEMS if n.split("_")[2] in ("clamp", "relu", "leaky", "sumsq", "sumabs")],
          "heldout": [n for n in PROBLEMS if n.split("_")[2] in ("relu6", "hardtanh2", "sumrelu", "sumsqrelu")]}


# ----------------------------------------------------------------------------- rendering

def _loops(p: GProblem, c: Composition) -> str:
    """The kernel body for problem ``p`` under composition ``c`` (C++, 2-space indent)."""
    fexpr = (EW_FUNCS if p.family == "ew" else RED_FUNCS)[p.func][1]
    step = "2" if c.variant == "half_cols" else "1"
    omp = "#pragma omp parallel for schedule(static)\n" if c.omp == "on" else ""
    if p.family == "ew":
        val = "float v = x[r * cols + k] * w[k] + b[k];"
        out = "y[r * cols + k] = v;" if c.variant == "drop_op" else f"y[r * cols + k] = {fexpr};"
        simd = "#pragma omp simd\n"
    else:
        val = "float v = x[r * cols + k];"
        out = "acc += v;" if c.variant == "drop_op" else f"acc += {fexpr};"
        simd = "#pragma omp simd reduction(+:acc)\n"
    vec = simd if c.vec == "simd" else ""
    B = int(c.block)
    if p.family == "ew":
        body = f"{{ {val} {out} }}"
        if B == 0:
            if c.order == "rc":
                return (f"{omp}for (int64_t r = 0; r < rows; ++r) {{\n{vec}"
                        f"  for (int64_t k = 0; k < cols; k += {step}) {body}\n}}\n")
            vec_r = "#pragma omp simd\n" if c.vec == "simd" else ""
            return (f"for (int64_t k = 0; k < cols; k += {step}) {{\n{vec_r}"
                    f"  for (int64_t r = 0; r < rows; ++r) {body}\n}}\n")
        inner = (f"  for (int64_t r = r0; r < r1; ++r) {{\n{vec}    for (int64_t k = k0; k < k1; k += {step}) {body}\n  }}\n"
                 if c.order == "rc" else
                 f"  for (int64_t k = k0; k < k1; k += {step}) {{\n{'#pragma omp simd' + chr(10) if c.vec == 'simd' else ''}"
                 f"    for (int64_t r = r0; r < r1; ++r) {body}\n  }}\n")
        kstart = "k0" if step == "1" else "k0 + ((k0 & 1) ? 1 : 0)"
        inner = inner.replace("int64_t k = k0;", f"int64_t k = {kstart};")
        return (f"{omp}for (int64_t r0 = 0; r0 < rows; r0 += {B}) {{\n"
                f"  const int64_t r1 = r0 + {B} < rows ? r0 + {B} : rows;\n"
                f"  for (int64_t k0 = 0; k0 < cols; k0 += {B}) {{\n"
                f"  const int64_t k1 = k0 + {B} < cols ? k0 + {B} : cols;\n{inner}  }}\n}}\n")
    # reductions: y[r] = alpha * sum_k h(x[r, k])
    if B == 0 and c.order == "rc":
        return (f"{omp}for (int64_t r = 0; r < rows; ++r) {{\n  float acc = 0.f;\n{vec}"
                f"  for (int64_t k = 0; k < cols; k += {step}) {{ {val} {out} }}\n  y[r] = acc * a;\n}}\n")
    if B == 0:  # column walk: one accumulator per row in y
        vec_r = "#pragma omp simd\n" if c.vec == "simd" else ""
        o = out.replace("acc +=", "y[r] +=")
        return (f"for (int64_t r = 0; r < rows; ++r) y[r] = 0.f;\n"
                f"for (int64_t k = 0; k < cols; k += {step}) {{\n{vec_r}"
                f"  for (int64_t r = 0; r < rows; ++r) {{ {val} {o} }}\n}}\n"
                f"for (int64_t r = 0; r < rows; ++r) y[r] *= a;\n")
    kstart = "k0" if step == "1" else "k0 + ((k0 & 1) ? 1 : 0)"
    if c.order == "rc":
        inner = (f"    for (int64_t r = r0; r < r1; ++r) {{\n      float acc = 0.f;\n{vec}"
                 f"      for (int64_t k = {kstart}; k < k1; k += {step}) {{ {val} {out} }}\n      y[r] += acc;\n    }}\n")
    else:
        vec_r = "#pragma omp simd\n" if c.vec == "simd" else ""
        o = out.replace("acc +=", "y[r] +=")
        inner = (f"    for (int64_t k = {kstart}; k < k1; k += {step}) {{\n{vec_r}"
                 f"      for (int64_t r = r0; r < r1; ++r) {{ {val} {o} }}\n    }}\n")
    return (f"{omp}for (int64_t r0 = 0; r0 < rows; r0 += {B}) {{\n"
            f"  const int64_t r1 = r0 + {B} < rows ? r0 + {B} : rows;\n"
            f"  for (int64_t r = r0; r < r1; ++r) y[r] = 0.f;\n"
            f"  for (int64_t k0 = 0; k0 < cols; k0 += {B}) {{\n"
            f"    const int64_t k1 = k0 + {B} < cols ? k0 + {B} : cols;\n{inner}  }}\n"
            f"  for (int64_t r = r0; r < r1; ++r) y[r] *= a;\n}}\n")


def render_solution(p: GProblem, c: Composition) -> str:
    """The single-file KernelBench solution (``ModelNew``) for problem ``p`` under composition ``c``."""
    tag = hashlib.sha256(f"{p.name}|{format_composition(c)}".encode()).hexdigest()[:10]
    body = "\n".join("  " + ln if ln else ln for ln in _loops(p, c).splitlines())
    if p.family == "ew":
        sig = "const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols"
        pre = ""
        model = ("class ModelNew(nn.Module):\n    def __init__(self, features: int):\n        super().__init__()\n"
                 "        self.weight = nn.Parameter(torch.empty(features))\n"
                 "        self.bias = nn.Parameter(torch.empty(features))\n\n"
                 "    def forward(self, x):\n        x = x.contiguous()\n        y = torch.empty_like(x)\n"
                 "        lib.kern(x, self.weight, self.bias, y, x.shape[0], x.shape[1])\n        return y\n")
    else:
        sig = "const float* x, const float* alpha, float* y, int64_t rows, int64_t cols"
        pre = "  const float a = alpha[0];\n"
        model = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                 "        self.alpha = nn.Parameter(torch.empty(()))\n\n"
                 "    def forward(self, x):\n        x = x.contiguous()\n        y = torch.empty(x.shape[0], 1)\n"
                 "        lib.kern(x, self.alpha, y, x.shape[0], x.shape[1])\n        return y\n")
    return ("import torch\nimport torch.nn as nn\nfrom shiftkit.kernels.runtime import load_c\n\n"
            f'SRC = r"""\n#include <cstdint>\nextern "C" void kern({sig}) {{\n{pre}{body}\n}}\n"""\n'
            f'lib = load_c(name="g_{tag}", source=SRC)\n\n\n{model}')


# ----------------------------------------------------------------------------- policy I/O

def prompt_for(p: GProblem) -> str:
    """The policy's prompt: the problem family, function and shape, then ``kernel:``."""
    return f"task {p.family} {p.func} {p.rows}x{p.cols}\nkernel:"


def sft_rows(n: int, seed: int = 0, split: str = "train", compact: bool = True) -> list[dict]:
    """``n`` SFT rows of random valid compositions on the split's problems (TRL prompt-completion format,
    plus the ``problem`` source and ``problem_name`` columns the kernel reward reads); completions in the
    compact format by default."""
    rng = random.Random(f"kernel-grammar-sft:{seed}")
    names = SPLITS[split]
    rows = []
    for _ in range(n):
        p = PROBLEMS[rng.choice(names)]
        rows.append({"prompt": prompt_for(p), "completion": " " + format_composition(random_composition(rng), compact),
                     "problem": p.source(), "problem_name": p.name})
    return rows


def rl_rows(split: str = "train") -> list[dict]:
    """One RL row per problem of the split: ``prompt``, ``problem`` (source), ``problem_name``."""
    return [{"prompt": prompt_for(PROBLEMS[n]), "problem": PROBLEMS[n].source(), "problem_name": n}
            for n in SPLITS[split]]


# The task's timing protocol: the environment's paired milestones with a smaller sample budget than its
# default (1 block of 10-20 paired rounds instead of 3 blocks of 30-40), so a profiled composition costs
# about a minute, not several, on a loaded 2-core machine. The decision rule (5% margin, confidence
# intervals) is the environment's own.
TASK_EVAL_CONFIG = {"timing_blocks": 1, "timed_calls": 10, "max_timed_calls": 20, "min_block_rounds": 5, "warmup": 2}


def problem_from_name(name: str) -> GProblem:
    if name not in PROBLEMS:
        raise ValueError(f"unknown grammar problem {name!r}; known: {', '.join(PROBLEMS)}")
    return PROBLEMS[name]


def grammar_reward(prompts, completions, problem_name, env=None, config: dict | None = None, log_extra=None,
                   mode: str = "profile", **kwargs) -> list[float | None]:
    """TRL-signature reward: parse each completion's composition, render it for the row's problem and
    evaluate it in the real environment (``mode``: ``profile``, the milestones -1/+1/+2/+3, or ``verify``,
    -1/+1 without timing; :data:`TASK_EVAL_CONFIG` unless ``config``). A
    completion that does not parse is -1 (``format_error`` in the findings). A composition the environment
    could not judge (service full, deadline, harness failure) is ``None``: unscorable, never a silent -1.
    ``env`` is a :class:`shiftkit.kernels.envclient.KernelEnv` (default: the one ``reward_fn.configure``
    bound, e.g. a ``kernels serve`` service, else this process); the requests go out together
    (``evaluate_many``: a service or a pool judges them in parallel)."""
    from shiftkit.errors import ShiftkitError
    from shiftkit.kernels.reward_fn import bound_env, completion_text

    env = env or bound_env()
    config = TASK_EVAL_CONFIG if config is None else config
    out: list[float | None] = []
    extra: list[dict] = []
    reqs, idx = [], []
    for i, (c, name) in enumerate(zip(completions, problem_name)):
        p = problem_from_name(name)
        try:
            comp = parse_composition(completion_text(c))
        except ValueError as e:
            out.append(-1.0)
            extra.append({"reward": -1.0, "reason": f"format_error: {e}", "composition": None})
            continue
        out.append(None)
        extra.append({"composition": format_composition(comp)})
        reqs.append((p.source(), render_solution(p, comp), mode, dict(config), p.name))
        idx.append(i)
    for i, d in zip(idx, env.evaluate_many(reqs) if reqs else []):
        if "error" in d:
            if d.get("status") == 400:
                raise ShiftkitError(f"grammar reward: the environment refused row {i} ({problem_name[i]}): {d['error']}")
            extra[i] |= {"reward": None, "reason": f"unscorable: {d['error']}"}
            continue
        out[i] = float(d["reward"])
        extra[i] |= {"reward": out[i], "reason": d.get("reason", ""),
                     "codes": [f["code"] for f in d.get("findings", []) if f.get("severity") == "error"],
                     "speedup_eager": d.get("speedup_eager"), "speedup_compile": d.get("speedup_compile"),
                     "cached": bool(d.get("cached"))}
    if log_extra is not None:
        log_extra("kernel", extra)
    return out


def grammar_verify_reward(prompts, completions, problem_name, env=None, config: dict | None = None, log_extra=None,
                          **kwargs) -> list[float | None]:
    """:func:`grammar_reward` in ``verify`` mode (-1 wrong, +1 correct; no timing): the cheap reward, e.g.
    ``shiftkit rl reward=shiftkit.agent.kernel_grammar:grammar_verify_reward``."""
    return grammar_reward(prompts, completions, problem_name, env, config, log_extra, mode="verify", **kwargs)
