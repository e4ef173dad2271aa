"""Pure correctness functions: scale-aware tolerances, output comparison, input transforms, degenerate tests.

**Tolerance.** An element passes when ``|a - e| <= atol * s + rtol * |e|`` where ``s`` is the root mean
square of the reference tensor's finite values: the bound scales with the output (a softmax whose outputs
are ~1e-3 is held to ~1e-7 absolute, not to 1e-4), and a linear kernel that is right at one scale is right
at every scale. Where the harness has a float64 reference, ``atol * s`` is replaced by each element's own term
(:func:`element_scales`, :func:`_absolute`): its sensitivity to rounding-sized moves of its inputs and weights
(at least 2^-7 of its row's rms, at most ``s``) plus twice the reference's own error there, so a row 10^6 times
quieter than the loudest is not free (redteam8 h04). The budget is per dtype: float64 (and complex128) far tighter than float32 (and complex64),
so an fp64 problem computed in fp32 fails; complex numbers compare by complex magnitude. NaN must sit where
the reference has NaN and infinities must match exactly. Integer and bool outputs compare exactly.

**Python-float leaves** (``.item()`` outputs) are held to the precision the reference computed them in
(:func:`leaf_dtypes`): the dtype of the tensor the leaf was read from, loosened where the reference's own error
against its float64 twin (inputs and weights in float64) or a downcast inside it says it is less precise; never the
widest input dtype alone (a float32 mean of bfloat16 inputs is float32-accurate).

**Transforms.** Beyond the problem's own input distribution the checked rounds use transforms that cover
the domain, both ways: sign flips; scaling up by the largest of 2^5, 2^4, ..., 2^1 on which the reference is
well defined (so an input range that overflows at 2^5 is still widened), starting at 2^10 when an input is
float64 (fp64 exp overflows only past ~709); scaling down by 2^-5 and by 2^-12 (an absolute threshold - "skip
blocks below 1e-3" - sees values it would drop); inputs with half their elements zeroed; integer inputs of
every dtype (bool excluded) moved by 2^(b/2) for b bits, clamped to the dtype's range (``int_wide``: int64 by
2^32, int32 by 2^16: an int64 problem computed in int32, or an int32 one in 16-bit lanes, is wrong); an
additive offset (``shift``: ``x + c``, ``c`` the largest of 32, 16, ..., 2 times the input's rms on which the
reference is well defined, so a one-pass variance ``E[x^2] - E[x]^2`` cancels catastrophically); inputs
rounded to a coarse grid (``ties``: the power of two nearest the rms, so exact ties occur and an argmax must
break them as torch does); and a near-repeat of an earlier round (``perturb``: the same inputs with a few
elements redrawn, so an output cache keyed on a sample of the input returns a stale answer); a few elements of every
row set to a large multiple of the row's rms (``outlier``: 2^10, 2^8, 2^6 or 2^4 times, the largest on which the
reference is well defined), so a max over a prefix or a sample misses the row's maximum. Every
power-of-two scale, offset and grid is exact in binary floating point. A transform is used only where the
reference is well defined on it: its output is finite wherever the fp64 reference's is and the fp32 and fp64
references agree within the budget (so an ill-conditioned input never fails an honest kernel), the reference
does not raise (an index moved out of range), and discrete outputs (indices) never get the zeroed inputs.
NaN inputs are not used: KernelBench never feeds NaN, and an honest ``fmaxf(x, 0)`` ReLU drops NaN where torch
keeps it (a false rejection).

**Integer and bool inputs.** Every non-empty integer or bool input is varied on its own (:func:`redraw`), by the
first variant on which the reference is well defined: bool - redrawn at the original's density, then with a True
forced in every last-dim row, then rows permuted; integers - redrawn within the original's [min, max] (sorted
along the last dim, from the original's first element, where the original is sorted: offsets stay offsets), then
rows permuted; int64 also moved beyond 2^53 with random low 32 bits per element (``far``), narrower integers drawn
over their dtype's whole range (``full``), bool with whole rows False and True (``empty``, else True rows only:
``dense``), each a round of its own.

**Weights.** :func:`perturb_params` moves every floating parameter by noise scaled to it, so a parameter that is
constant at init (LayerNorm's 1 and 0) takes values no candidate can assume; :func:`perturb_buffers` moves every
floating persistent buffer (BatchNorm's running mean 0 and variance 1) by the values' own rule: additively where
the buffer is all zero, multiplicatively (sign, zeros and infinities kept) otherwise.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

# per-dtype (atol as a fraction of the output's rms, rtol)
TOLERANCE_PRESETS: dict[str, dict[str, tuple[float, float]]] = {
    "default": {"float64": (1e-10, 1e-10), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)},
    "cuda_agent": {"float64": (1e-2, 1e-2), "float32": (1e-2, 1e-2), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)},
    "strict": {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)},
}
_REAL_OF = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
# float8 formats: one step of the format (its machine epsilon) in every preset, as atol (of the rms) and rtol. A
# kernel scaling by a reciprocal, or converting through float16 as hardware does, differs from the reference by
# one step where its fp32 value lies near an fp8 rounding midpoint (redteam10 hn17): exact equality rejected it
FP8_STEP = {"float8_e4m3fn": 2.0 ** -3, "float8_e4m3fnuz": 2.0 ** -3, "float8_e5m2": 2.0 ** -2,
            "float8_e5m2fnuz": 2.0 ** -2, "float8_e8m0fnu": 1.0}
# appended, never reordered: a transform's input seed is derived from its index here
TRANSFORMS = ("negate", "scale_up", "scale_down", "scale_tiny", "sparse", "int_wide", "shift", "ties", "outlier")
SCALE = 32.0
# the largest well-defined factor is used; below 2 in eighth-octave steps down to 2^(1/8), so the round reaches
# within 9% of where the reference stops being defined (redteam12 h01: log-rates in [0, 60) whose exp overflows at
# 88.7 were never met above 60: x2 overflowed, and an exp wrong only above 64 passed)
SCALE_UP_LADDER = (32.0, 16.0, 8.0, 4.0, 2.0, 2.0 ** 0.5, 2.0 ** 0.25, 2.0 ** 0.125)
# float64 inputs: exp overflows only past ~709, so the ladder starts at 2^10 (the largest well-defined factor)
SCALE_UP_LADDER_FP64 = (1024.0, 512.0, 256.0, 128.0, 64.0) + SCALE_UP_LADDER
SCALE_TINY = 2.0 ** -12  # below any absolute threshold a kernel might use to skip work on O(1) inputs
INT_WIDE = 2 ** 32  # int64; every integer dtype of b bits is moved by 2^(b/2) (int32: 2^16, int8: 2^4)
SHIFT_LADDER = (32.0, 16.0, 8.0, 4.0, 2.0)  # offsets in units of the input's rms, the largest well-defined one:
# a one-pass LayerNorm variance (fp32, 512 columns, vectorised) fails at 32 and passes at 16; an honest fp32
# two-pass with sequential sums stays within the 1e-4 budget at 32 up to ~4096 columns
INT_FAR = 2 ** 53  # int64 "far" offsets: beyond the integers fp64 holds exactly, with random low 32 bits
REDRAW_VARIANTS = {"bool": ("density", "row", "shuffle"), "int": ("range", "shuffle")}  # tried in order
# rounds of their own beyond the redraw above, each a chain tried in order (the first well-defined one is kept):
# int64 beyond 2^53 (``far``); narrower integers over their dtype's whole range (``full``: an int32 -> int64 scan
# accumulated in int32 overflows at once); bool with whole rows False and True (``empty``; ``dense``: True rows
# only, where an all-False row has no defined output, e.g. a masked softmax)
EXTRA_VARIANTS = {"int64": ("far",), "int": ("full",), "bool": ("empty", "dense")}
EDGE_ROWS = 8  # ``empty``/``dense``: one last-dim row in EDGE_ROWS (at least one) set all False, as many all True
OUTLIER_LADDER = (1024.0, 256.0, 64.0, 16.0)  # outlier magnitudes in units of the row's rms, the largest admitted
OUTLIERS_PER_ROW = 2
SCALAR_MOVES = (1.0, 0.5, 0.25)  # Python-float inputs: fractions of the drawn log2 move, the largest admitted is used
SCALAR_FAR = (7.0, 8.0)  # ... and a far move each way, by 2^u with u drawn in this range, where the reference is defined
PARAM_SHRINK = (1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64)  # a refused weight move is retried at these fractions
PARAM_NOISE = 0.5  # weights: p + PARAM_NOISE * rms(p) * randn (rms 0, e.g. a zero bias: rms taken as 1)
PERTURB_ELEMENTS = 8
QUIET_SHARE, QUIET_SCALE = 1 / 16, 2.0 ** -16  # buffers: this share of the elements also scaled by this (near-dead)


def tolerance_for(dtype_name: str, preset: str = "default", atol: float | None = None, rtol: float | None = None,
                  reduced_precision: bool = False) -> tuple[float, float]:
    """(atol as a fraction of the rms scale, rtol) for an output dtype; integers/bools: exact (0, 0); float8
    formats: one step of the format (:data:`FP8_STEP`); any other floating dtype a preset does not name: an error,
    never an exact comparison."""
    if preset not in TOLERANCE_PRESETS:
        raise ValueError(f"unknown tolerance preset {preset!r}; valid: {', '.join(TOLERANCE_PRESETS)}")
    name = _REAL_OF.get(dtype_name, dtype_name)
    if reduced_precision and name == "float32":
        name = "bfloat16"  # ALLOW_REDUCED_PRECISION: fp32 outputs get the bf16 budget
    if name in FP8_STEP:
        a = r = FP8_STEP[name]
    elif name in TOLERANCE_PRESETS[preset] or not _floating(name) or (atol is not None and rtol is not None):
        a, r = TOLERANCE_PRESETS[preset].get(name, (0.0, 0.0))
    else:  # a floating dtype no rule names: not compared exactly by default
        raise ValueError(f"no tolerance for floating dtype {name!r} in preset {preset!r}; pass atol= and rtol=")
    return (a if atol is None else atol), (r if rtol is None else rtol)


def _floating(name: str) -> bool:
    import torch

    d = getattr(torch, name, None)
    return isinstance(d, torch.dtype) and (d.is_floating_point or d.is_complex)


def derive_seed(secret: int, public: int, purpose: str, index: int) -> int:
    """Pure: an input seed no candidate can predict without the secret, and that tells nothing about any
    other round's seed (a hash, not arithmetic on the secret)."""
    h = hashlib.sha256(f"{secret}|{public}|{purpose}|{index}".encode()).digest()
    return int.from_bytes(h[:8], "little") & (2**63 - 1)


def _normable(x):
    """``x``, or its float64 copy where torch's norms cannot widen its dtype themselves (float8)."""
    import torch

    return x if x.dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16) else x.double()


def scale_of(t) -> float:
    """Root mean square of the finite values of a floating/complex tensor (0 if none)."""
    import torch

    x = t.detach()
    x = _normable(x.abs() if x.is_complex() else x)
    if not x.numel():
        return 0.0
    n = float(torch.linalg.vector_norm(x, 2, dtype=torch.float64))  # one pass, no float64 copy
    if math.isfinite(n):  # every value finite (a non-finite one makes the norm inf or NaN)
        return n / math.sqrt(x.numel())
    x = x.double()
    x = x[torch.isfinite(x)]
    return float(x.pow(2).mean().sqrt()) if x.numel() else 0.0


def mismatches(expected, actual, atol: float, rtol: float, scales=None) -> tuple[int, float]:
    """Pure: (elements outside ``|a - e| <= atol * rms(e) + rtol * |e|``, max finite |a - e|). NaN only
    matches NaN, an infinity only the same infinity. ``scales`` (:func:`element_scales`) replaces the
    tensor-wide ``atol * rms(e)`` by each element's own absolute budget."""
    import torch

    e, a = expected.detach(), actual.detach()
    wide = torch.complex128 if e.is_complex() else torch.float64
    e, a = e.to(wide), a.to(wide)
    absolute = _absolute(expected, atol, scales)
    diff = torch.sub(a, e).abs_() if not e.is_complex() else (a - e).abs()
    if not diff.numel():
        return 0, 0.0
    top = float(diff.max())  # NaN or inf unless both are finite everywhere
    if math.isfinite(top):  # the common case: the bound alone decides
        bound = e.abs().mul_(rtol).add_(absolute)
        return int(torch.count_nonzero(diff > bound)), top
    fin = torch.isfinite(e.real) & torch.isfinite(e.imag) if e.is_complex() else torch.isfinite(e)
    ok = (diff <= absolute + rtol * e.abs()) & fin  # an infinity matches only itself
    if e.is_complex():
        ok |= (a == e)
        nan_e, nan_a = torch.isnan(e.real) | torch.isnan(e.imag), torch.isnan(a.real) | torch.isnan(a.imag)
    else:
        ok |= (a == e)  # equal infinities
        nan_e, nan_a = torch.isnan(e), torch.isnan(a)
    ok &= ~(nan_e ^ nan_a)
    ok |= nan_e & nan_a
    bad = int((~ok).sum())
    finite = diff[torch.isfinite(diff)]
    maxdiff = float(finite.max()) if finite.numel() else (0.0 if not bad else math.inf)
    if bad and maxdiff == 0.0:
        maxdiff = math.inf
    return bad, maxdiff


SENSITIVITY_DRAWS = 4  # k: the element's sensitivity is the rms over k draws (chi^2_4: below 0.1 x its own with p ~ 2e-4,
# where the row floor and the honest kernels' own ~1e-6 relative error leave a 10x margin; k = 2 passed the battery too)
SENSITIVITY_DELTA = 2.0 ** -20  # relative size of each draw's move of every floating input, weight and buffer
REFERENCE_ERROR_FACTOR = 2.0  # |e - e64| x this: a kernel as accurate as the reference (or more) always passes
# an element's sensitivity is taken as at least this fraction of its last-dim row's rms: an honest kernel's
# intermediates can cancel where its inputs do not (tanh as 1 - 2/(exp(2x)+1) near 0, 1 + erf(x) in a GELU, m + lse
# in a log-softmax), erring by a few ulps of the row's scale; 2^-7 of atol (1e-4) is ~13 fp32 ulps of it
ROW_FLOOR = 2.0 ** -7


def element_scales(expected, e64, sumsq, k: int, delta: float = SENSITIVITY_DELTA):
    """Pure: each element's (sensitivity, reference error), stacked as a float64 tensor of shape
    ``(2, *expected.shape)``, from which :func:`mismatches` takes each element's own absolute budget
    ``min(atol * max(sigma, ROW_FLOOR * rms(row)), atol * rms(e)) + 2 * |e - e64| + tiny`` in place of the
    tensor-wide ``atol * rms(e)``.

    ``sigma`` is the element's sensitivity to rounding-sized moves of everything it is computed from: ``sumsq``
    is the sum over ``k`` moves of every floating input and weight by ``x * (1 + delta * z)`` (:func:`moved_relative`)
    of the float64 reference's squared change there (:func:`squared_change`), and ``sigma = sqrt(sumsq / k) / delta``.
    For a sum of terms it is the root sum of squares of the terms, the scale at which any order of fp32 rounding
    errs. So an element's budget is set by what that element is made of, not by the tensor's rms: a kernel
    that drops a row whose inputs are 10^-8 of the tensor's largest (redteam8 h04) is wrong by ~100% of that
    row, far outside it, while an element that is small by cancellation keeps the budget its terms give.
    ``|e - e64|`` is the reference's own error there (an fp32 ``1 - sigmoid(x)`` that rounds to 0): a kernel at
    least as accurate as the reference passes. Where the float64 reference is not finite both are 0 (the
    comparison's NaN/inf rules decide there); where a move crossed an overflow the element is that ill-conditioned
    and its sensitivity is infinite. The sensitivity term never exceeds the tensor-wide ``atol * rms(e)``: it only
    tightens (a one-pass variance, wrong by ~64 ulps of its ill-conditioned inputs on the ``shift`` round, stays
    caught); only the reference's own error can loosen an element beyond it (an fp32 ``1 - sigmoid(x)`` near 1,
    rounded to steps of 6e-8 on outputs of 1e-6: an accurate ``sigmoid(-x)`` is wrong by a step)."""
    import torch

    e = expected.detach()
    cplx = e.is_complex()
    r = e64.detach().to(torch.complex128) if cplx else e64.detach().double()
    out = torch.empty((2,) + tuple(r.shape), dtype=torch.float64)
    sig, err = out[0], out[1]
    if k:
        torch.div(sumsq, k * delta * delta, out=sig).sqrt_()
    else:
        sig.zero_()
    if cplx:
        err.copy_((e.to(r.dtype) - r).abs())
    else:
        torch.sub(e.to(r.dtype), r, out=err).abs_()
    if not bool(torch.isfinite(out).all()):  # rare: overflowed moves or a non-finite reference
        fin = torch.isfinite(r.real) & torch.isfinite(r.imag) if cplx else torch.isfinite(r)
        sig.copy_(torch.where(fin, torch.nan_to_num(sig, nan=math.inf, posinf=math.inf), torch.zeros_like(sig)))
        err.copy_(torch.where(torch.isfinite(err), err, torch.zeros_like(err)))
    return out


def squared_change(e64: Any, moved: Any) -> Any:
    """Pure: ``|moved - e64|^2`` (float64) for every floating/complex tensor of the float64 reference's output
    ``e64`` (``moved``: its output after a move, same structure), None for every other leaf."""
    import torch

    if isinstance(e64, torch.Tensor):
        if (e64.is_floating_point() or e64.is_complex()) and isinstance(moved, torch.Tensor) and moved.shape == e64.shape:
            d = moved.detach() - e64.detach()
            d = d.abs() if d.is_complex() else d.double()
            return d.mul_(d)
        return None
    if isinstance(e64, (list, tuple)) and isinstance(moved, (list, tuple)) and len(moved) == len(e64):
        return [squared_change(v, moved[i]) for i, v in enumerate(e64)]
    if isinstance(e64, dict) and isinstance(moved, dict) and set(moved) == set(e64):
        return {k: squared_change(v, moved[k]) for k, v in e64.items()}
    return None


def add_tree(acc: Any, x: Any) -> Any:
    """Pure: leafwise ``acc + x`` over two structures of tensors (None: the other one; a None leaf stays None)."""
    import torch

    if acc is None:
        return x
    if isinstance(acc, torch.Tensor):
        return acc + x if isinstance(x, torch.Tensor) else None
    if isinstance(acc, list) and isinstance(x, list):
        return [add_tree(a, b) if a is not None else None for a, b in zip(acc, x)]
    if isinstance(acc, dict) and isinstance(x, dict):
        return {k: add_tree(v, x.get(k)) if v is not None else None for k, v in acc.items()}
    return None


def moved_relative(x: Any, gen, delta: float = SENSITIVITY_DELTA) -> Any:
    """Pure given ``gen``: every floating (complex) tensor of ``x`` times ``1 + delta * z``, z zero-mean with unit
    variance per element (uniform on [-sqrt 3, sqrt 3]: a sum of many such terms is as normal as a sum of normals,
    at a fraction of the cost of normals on a 16 MB input; complex: real and imaginary parts, each over sqrt 2),
    drawn from ``gen`` in order; everything else as it is."""
    import torch

    a = delta * math.sqrt(3.0)
    if isinstance(x, torch.Tensor):
        if x.is_floating_point():
            return torch.addcmul(x, x, torch.empty(x.shape, dtype=x.dtype).uniform_(-a, a, generator=gen))
        if x.is_complex():
            real = torch.float64 if x.dtype == torch.complex128 else torch.float32
            b = a / math.sqrt(2.0)
            z = torch.complex(torch.empty(x.shape, dtype=real).uniform_(-b, b, generator=gen),
                              torch.empty(x.shape, dtype=real).uniform_(-b, b, generator=gen))
            return torch.addcmul(x, x, z.to(x.dtype))
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(moved_relative(v, gen, delta) for v in x)
    if isinstance(x, dict):
        return {k: moved_relative(v, gen, delta) for k, v in x.items()}
    return x


def scales_tree(expected: Any, e64: Any, sumsq: Any, k: int, delta: float = SENSITIVITY_DELTA) -> Any:
    """Pure: ``expected``'s structure with :func:`element_scales` for each floating/complex tensor (from the
    float64 reference ``e64`` and the summed :func:`squared_change` of ``k`` moves, same structure), None for
    every other leaf."""
    import torch

    if isinstance(expected, torch.Tensor):
        if (expected.is_floating_point() or expected.is_complex()) and isinstance(e64, torch.Tensor) \
                and e64.shape == expected.shape and (k == 0 or isinstance(sumsq, torch.Tensor)):
            return element_scales(expected, e64, sumsq, k, delta)
        return None
    if isinstance(expected, (list, tuple)) and isinstance(e64, (list, tuple)) and len(e64) == len(expected):
        return [scales_tree(v, e64[i], sumsq[i] if isinstance(sumsq, list) else None, k, delta)
                for i, v in enumerate(expected)]
    if isinstance(expected, dict) and isinstance(e64, dict) and set(e64) == set(expected):
        return {key: scales_tree(v, e64[key], sumsq.get(key) if isinstance(sumsq, dict) else None, k, delta)
                for key, v in expected.items()}
    return None


def _absolute(e, atol: float, scales):
    """The absolute term of the budget: tensor-wide ``atol * rms(e)``, or each element's own (:func:`element_scales`):
    ``min(atol * max(sigma, ROW_FLOOR * rms(row)), atol * rms(e)) + 2 * |e - e64| + tiny``."""
    import torch

    tensor = atol * scale_of(e)
    if scales is None:
        return tensor
    real = {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}
    tiny = torch.finfo(real.get(e.dtype, e.dtype)).tiny  # the dtype's smallest normal: a flush-to-zero kernel
    own = torch.maximum(scales[0], _row_rms_keep(e).mul_(ROW_FLOOR))  # the row's rms broadcast, not copied
    return own.mul_(atol).clamp_(max=tensor).add_(scales[1], alpha=REFERENCE_ERROR_FACTOR).add_(tiny)


def _row_rms_keep(e):
    """Each last-dim row's rms (of its finite values, complex by magnitude), float64, shaped to broadcast
    against ``e`` (its last dim 1; a 0-d tensor its own row, 0-d)."""
    import torch

    x = _normable(e.detach().abs() if e.is_complex() else e.detach())
    if x.dim() == 0:
        return _row_rms_keep(x.reshape(1)).reshape(())
    r = torch.linalg.vector_norm(x, 2, dim=-1, keepdim=True, dtype=torch.float64)
    if bool(torch.isfinite(r).all()):  # every value finite (the common case): one pass, no float64 copy
        return r.div_(math.sqrt(x.shape[-1])) if x.shape[-1] else r
    x = x.double()
    fin = torch.isfinite(x)
    sq = torch.where(fin, x * x, torch.zeros_like(x))
    return (sq.sum(-1, keepdim=True) / fin.sum(-1, keepdim=True).clamp(min=1)).sqrt()


def row_rms(e):
    """Pure: each element's last-dim row's rms (of its finite values, complex by magnitude), broadcast to ``e``'s
    shape, float64; a 0-d tensor is its own row."""
    return _row_rms_keep(e).expand(e.shape).clone()


# a float8 output is the final rounding of a value computed in a wider dtype (torch has no float8 arithmetic on the
# CPU): one step of the format is each element's budget, for values near a rounding boundary. An honest kernel
# lands on the other side of one on few elements: a reciprocal for a division on ~1e-5 of them, a conversion
# through float16 (double rounding, redteam10 hn17) on ~1 in 128; a truncating encoder on about half (redteam12
# h05, +1 within the one-step budget). More than this fraction rounded otherwise is a biased quantiser
FLOAT8_OTHERWISE_MAX = 0.05
FLOAT8_OTHERWISE_SLACK = 8  # elements, for tiny outputs


def rounded_otherwise(expected, actual) -> int:
    """Pure: the elements of a float8 output whose value differs from the reference's (NaN equal to NaN, -0
    equal to 0); 0 for any other dtype."""
    import torch

    if not str(expected.dtype).startswith("torch.float8"):
        return 0
    e, a = expected.detach().float(), actual.detach().float()
    return int(torch.count_nonzero((e != a) & ~(torch.isnan(e) & torch.isnan(a))))


def compare(expected: Any, actual: Any, preset: str = "default", atol: float | None = None, rtol: float | None = None,
            path: str = "out", reduced_precision: bool = False, leaf_dtype: Any = "float64",
            scales: Any = None, leaf_slack: dict | None = None) -> tuple[str | None, str, float]:
    """Compare nested outputs. Returns (finding code or None, message, max abs diff). Exact container
    types, shapes and dtypes; values with :func:`mismatches`. A Python-float leaf gets the budget of
    ``leaf_dtype``, the precision the reference computed it in (see :func:`leaf_dtypes`): a float32 mean
    returned with ``.item()`` is float32-accurate, whatever Python's float can hold. ``leaf_dtype`` is one
    dtype name for every leaf, or a mapping from a leaf's path (``"out"``, ``"out[1]"``) to its dtype name.
    ``scales``: None (every tensor gets ``atol * rms``), or ``expected``'s structure with each floating tensor's
    :func:`element_scales` (each element's own budget), or None where it has none. ``leaf_slack``: a Python-float
    leaf's absolute slack by path (:func:`leaf_noise` times :data:`LEAF_NOISE`), on top of its relative budget,
    where ``scales`` holds none for it (a float at the leaf's place: that round's own, :func:`with_leaf_slack`)."""
    import torch

    if type(actual) is not type(expected):
        return "output_type", f"{path}: type {type(actual).__name__} != {type(expected).__name__}", math.inf
    if isinstance(expected, torch.Tensor):
        for attr in ("shape", "dtype"):
            if getattr(actual, attr) != getattr(expected, attr):
                return "output_type", f"{path}: {attr} {getattr(actual, attr)} != {getattr(expected, attr)}", math.inf
        if expected.numel() == 0:
            return None, "", 0.0
        if expected.is_floating_point() or expected.is_complex():
            a, r = tolerance_for(str(expected.dtype).replace("torch.", ""), preset, atol, rtol, reduced_precision)
            own = scales if isinstance(scales, torch.Tensor) else None
            if own is not None and own.shape[1:] != expected.shape:
                raise ValueError(f"{path}: element scales of shape {tuple(own.shape)} for an output of {tuple(expected.shape)}")
            bad, maxdiff = mismatches(expected, actual, a, r, own)
            if bad:
                how = f"atol={a:g}*rms" if own is None else f"atol={a:g}*each element's sensitivity"
                return ("output_mismatch", f"{path}: {bad}/{expected.numel()} elements differ (max abs diff {maxdiff:.3g}, "
                        f"output rms {scale_of(expected):.3g}, {how}, rtol={r:g})", maxdiff)
            off = rounded_otherwise(expected, actual)
            if off > FLOAT8_OTHERWISE_MAX * expected.numel() + FLOAT8_OTHERWISE_SLACK:
                return ("output_mismatch", f"{path}: {off}/{expected.numel()} float8 elements rounded otherwise than the "
                        f"reference (one step is the budget of a rounding boundary, at most {FLOAT8_OTHERWISE_MAX:.0%} "
                        f"of them, not of a biased quantiser)", maxdiff)
            return None, "", maxdiff
        if not torch.equal(actual, expected):
            n = int((actual != expected).sum())
            return "output_mismatch", f"{path}: {n}/{expected.numel()} integer/bool elements differ", math.inf
        return None, "", 0.0
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return "output_type", f"{path}: length {len(actual)} != {len(expected)}", math.inf
        worst = 0.0
        for i, (e, a) in enumerate(zip(expected, actual)):
            code, msg, d = compare(e, a, preset, atol, rtol, f"{path}[{i}]", reduced_precision, leaf_dtype,
                                   scales[i] if isinstance(scales, (list, tuple)) else None, leaf_slack)
            if code:
                return code, msg, d
            worst = max(worst, d)
        return None, "", worst
    if isinstance(expected, dict):
        if set(actual) != set(expected):
            return "output_type", f"{path}: keys {sorted(actual)} != {sorted(expected)}", math.inf
        worst = 0.0
        for k in expected:
            code, msg, d = compare(expected[k], actual[k], preset, atol, rtol, f"{path}[{k!r}]", reduced_precision, leaf_dtype,
                                   scales.get(k) if isinstance(scales, dict) else None, leaf_slack)
            if code:
                return code, msg, d
            worst = max(worst, d)
        return None, "", worst
    if isinstance(expected, float):
        d = leaf_dtype if isinstance(leaf_dtype, str) else leaf_dtype.get(path, "float64")
        a, r = tolerance_for(d, preset, atol, rtol, reduced_precision)
        slack = scales if isinstance(scales, float) else (leaf_slack or {}).get(path, 0.0)  # the round's, or the plan's
        ok = abs(actual - expected) <= a * abs(expected) + r * abs(expected) + slack \
            or (math.isnan(actual) and math.isnan(expected)) or actual == expected
        return (None, "", abs(actual - expected)) if ok else ("output_mismatch", f"{path}: {actual} != {expected}", abs(actual - expected))
    if actual != expected:
        return "output_mismatch", f"{path}: {actual!r} != {expected!r}", math.inf
    return None, "", 0.0


def ladder(name: str, inputs: Any) -> tuple:
    """Pure: the factors a transform is tried with, largest first (the plan keeps the first on which the
    reference is well defined): ``scale_up`` by the widest floating dtype of ``inputs`` (float64 reaches
    2^10), ``shift`` :data:`SHIFT_LADDER`, every other transform once (``(None,)``)."""
    if name == "scale_up":
        wide = leaf_dtype_of(inputs) == "float64" and has_float(inputs)
        return SCALE_UP_LADDER_FP64 if wide else SCALE_UP_LADDER
    if name == "shift":
        return SHIFT_LADDER
    if name == "outlier":
        return OUTLIER_LADDER
    return (None,)


def applies(name: str, inputs: Any) -> bool:
    """Pure: does transform ``name`` change anything in ``inputs``? (``int_wide``: integer tensors, bool
    excluded; the others: floating/complex tensors; ``ties`` and ``shift``: real floating tensors.)"""
    if name == "int_wide":
        return has_int(inputs)
    if name == "ties":
        return any(t.is_floating_point() for t in _tensors(inputs))
    return has_float(inputs)


def _pow2(v: float) -> float:
    return 2.0 ** round(math.log2(v)) if v > 0 and math.isfinite(v) else 0.0


def int_offset(dtype) -> int:
    """Pure: how far ``int_wide`` moves an integer dtype of b bits: 2^(b/2) (int64 2^32, int32 2^16, int16
    2^8, int8/uint8 2^4), past what a lane of half the width holds, and a product of two moved values still
    fits."""
    import torch

    return 2 ** (torch.iinfo(dtype).bits // 2)


def transform(inputs: list, name: str, seed: int, factor: float | None = None) -> list:
    """Pure: apply a named transform to every tensor it concerns (floating/complex tensors; ``int_wide``:
    integer tensors other than bool; ``shift``/``ties``: real floating tensors); other values untouched.
    ``factor``: the scale of ``scale_up`` (default :data:`SCALE`), the offset of ``shift`` in units of the
    tensor's rms (default the first of :data:`SHIFT_LADDER`).

    ``int_wide``: ``x + s * 2^(b/2)`` (one random sign ``s`` per tensor), clamped to the dtype's range below
    64 bits (int64 is moved by 2^32, exact far below 2^63). ``shift``: ``x + s * c`` with ``c`` the power of
    two nearest ``factor * rms(x)`` (1 for an all-zero tensor): mean far from zero, so a one-pass variance
    cancels catastrophically. ``ties``: ``x`` rounded to the grid ``q``, the power of two nearest ``rms(x)``
    (a handful of distinct values, many exact ties; exact in binary floating point). ``outlier``: a few elements
    of every last-dim row set to +-(the power of two nearest ``factor`` times the row's rms) (:func:`outliers`;
    default the first of :data:`OUTLIER_LADDER`)."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def sign() -> int:
        return 1 if int(torch.randint(0, 2, (1,), generator=g)) else -1

    def tr(x):
        if isinstance(x, torch.Tensor) and name == "int_wide":
            if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
                return x
            if x.dtype == torch.int64:
                return x + sign() * INT_WIDE  # exact: |x| stays far below 2^63
            info = torch.iinfo(x.dtype)
            return (x.to(torch.int64) + sign() * int_offset(x.dtype)).clamp(info.min, info.max).to(x.dtype)
        if isinstance(x, torch.Tensor) and name == "outlier":
            return outliers(x, g, OUTLIER_LADDER[0] if factor is None else factor) \
                if x.is_floating_point() or x.is_complex() else x
        if isinstance(x, torch.Tensor) and name in ("shift", "ties"):
            if not (x.is_floating_point() or (x.is_complex() and name == "shift")) or x.numel() == 0:
                return x
            s = scale_of(x)
            if name == "shift":
                c = _pow2((SHIFT_LADDER[0] if factor is None else factor) * (s if s > 0 else 1.0))
                return x + sign() * c
            q = _pow2(s)
            if q == 0.0:
                return x
            return torch.where(torch.isfinite(x), torch.round(x / q) * q, x)
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            if name == "negate":
                return -x
            if name == "scale_up":
                return x * (SCALE if factor is None else factor)
            if name == "scale_down":
                return x / SCALE
            if name == "scale_tiny":
                return x * SCALE_TINY
            if name == "sparse":
                return torch.where(torch.rand(x.shape, generator=g) < 0.5, torch.zeros_like(x), x)
            raise ValueError(f"unknown transform {name!r}")
        if isinstance(x, (list, tuple)):
            return type(x)(tr(v) for v in x)
        if isinstance(x, dict):  # a batch mapping is inputs too (redteam10 h03: dicts passed every transform unchanged)
            return {k: tr(v) for k, v in x.items()}
        return x

    return [keep_sorted(v, tr(v)) for v in inputs]


def keep_sorted(orig, new):
    """Pure: ``new`` sorted along the last dim wherever ``orig`` is a real floating tensor that is (monotone
    there: bucket boundaries, positions, a grid), in the same direction. A sorted input is a domain invariant, as the integer redraw
    keeps it: a sign flip or a redrawn element would hand the reference an input it is not defined on
    (``torch.bucketize`` on unsorted boundaries answers anything) and reject an honest kernel (redteam8 hn10).
    Lists and tuples element by element; anything else as ``new`` is."""
    import torch

    if isinstance(orig, torch.Tensor) and isinstance(new, torch.Tensor):
        if orig.is_floating_point() and new.shape == orig.shape and new.numel():
            if _sorted_last(orig):
                return torch.sort(new, dim=-1).values
            if _sorted_last(-orig):
                return torch.sort(new, dim=-1, descending=True).values
        return new
    if isinstance(orig, (list, tuple)) and isinstance(new, (list, tuple)) and len(orig) == len(new):
        return type(new)(keep_sorted(a, b) for a, b in zip(orig, new))
    if isinstance(orig, dict) and isinstance(new, dict) and orig.keys() == new.keys():
        return {k: keep_sorted(orig[k], v) for k, v in new.items()}
    return new


def discrete_targets(inputs: Any) -> list[int]:
    """Pure: the positions (in :func:`_tensors` order) of the non-empty integer and bool tensors of ``inputs``:
    each is varied on its own by :func:`redraw` (so one inadmissible input never drops another's variation)."""
    return [i for i, t in enumerate(_tensors(inputs)) if not (t.is_floating_point() or t.is_complex()) and t.numel()]


def redraw_variants(t) -> tuple[str, ...]:
    """Pure: the :func:`redraw` variants of a discrete tensor, in the order the plan tries them (the first on
    which the reference is well defined is kept); int64 tensors also get ``far`` (a round of its own). Integers
    whose values are all distinct and not sorted (a permutation, distinct indices) are permuted first: their
    domain, as the values show it, has no repeats (a scatter onto repeated indices is not even deterministic).
    ``below`` and ``above`` come last: they move only a constant tensor, which the others leave as it is."""
    import torch

    if t.dtype == torch.bool:
        return REDRAW_VARIANTS["bool"]
    if t.numel() >= 2 and t.dim() >= 1 and not _sorted_last(t) and int(torch.unique(t).numel()) == t.numel():
        return tuple(reversed(REDRAW_VARIANTS["int"])) + ("below", "above")
    return REDRAW_VARIANTS["int"] + ("below", "above")


def extra_variants(t) -> tuple[tuple[str, ...], ...]:
    """Pure: the chains of :func:`redraw` variants a discrete tensor gets as rounds of their own, beyond
    :func:`redraw_variants` (:data:`EXTRA_VARIANTS`)."""
    import torch

    if t.dtype == torch.bool:
        return (EXTRA_VARIANTS["bool"],)
    return (EXTRA_VARIANTS["int64"] if t.dtype == torch.int64 else EXTRA_VARIANTS["int"],)


def _sorted_last(x) -> bool:
    """Is ``x`` non-decreasing along its last dim (of at least 2 elements)?"""
    return x.dim() >= 1 and x.shape[-1] >= 2 and bool((x[..., 1:] >= x[..., :-1]).all())


def redraw_tensor(x, variant: str, seed: int):
    """Pure: a new draw of a discrete tensor within the domain its values show, from ``seed``.

    bool: ``density`` - every element True with the original's fraction of Trues (a mask with holes, with
    Trues after Falses: no prefix or causal structure survives); ``row`` - the same with one True forced at a
    random position of every last-dim row (no all-False row, so e.g. a masked softmax stays defined);
    ``shuffle`` - every last-dim row permuted at random (each row keeps its count of Trues).
    integers: ``range`` - uniform within the original's [min, max]; where the original is non-decreasing along
    its last dim (offsets, boundaries) the draw is sorted along it and starts, row by row, at the original's
    first element (so offsets stay valid offsets); ``shuffle`` - every last-dim row permuted (the row keeps its
    values: no zero divisor appears where there was none); ``below`` - a constant tensor of ``c >= 2`` (every
    length the full length, redteam8 h09) drawn uniformly in [1, c], anything else as it is; ``above`` - a constant
    tensor of ``c >= 0`` (token types all 0, one class index: redteam12 h02 ignored all-zero token types) drawn
    element by element in {c, c + 1}, anything else as it is (where c + 1 is out of the reference's domain, it
    raises and the variant is dropped); ``far`` (int64 only) - ``x + s * (2^53 + r)``, ``r``
    uniform in [0, 2^32) per element: beyond the integers fp64 holds exactly (either sign), with random low 32 bits whose
    order is not the values' order (an fp64 or a low-word computation is wrong; one common offset would keep
    every low word's order), the sign ``s`` chosen so that nothing overflows (else ``x`` unchanged); ``full``
    (integers below 64 bits) - uniform over the dtype's whole range (sorted along the last dim where the original
    is): a result wider than the input (int32 in, int64 out) accumulated at the input's width overflows at once.
    bool ``empty`` - the ``density`` draw with one last-dim row in :data:`EDGE_ROWS` (at least one) all False and
    as many others all True (a 1-row tensor: all False); ``dense`` - the ``row`` draw (a True in every row) with
    the same rows all True. A constant mask (all True or all False) is drawn at density 1/2 by ``empty`` and
    ``dense``: a kernel that ignores a mask that happens to be constant is wrong. A constant integer tensor is
    returned as it is by ``full`` (a flag or a size, not a domain)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    if x.numel() == 0:
        return x
    if variant == "shuffle":
        if x.dim() == 0:
            return x
        perm = torch.rand(x.shape, generator=g).argsort(dim=-1)
        return torch.gather(x, -1, perm)
    if x.dtype == torch.bool:
        if variant not in ("density", "row", "empty", "dense"):
            raise ValueError(f"unknown redraw variant {variant!r} for bool")
        p = float(x.double().mean())
        if variant in ("empty", "dense") and p in (0.0, 1.0):
            p = 0.5  # a constant mask shows no density: its rounds of their own draw half (redteam6 h08)
        out = torch.rand(x.shape, generator=g, dtype=torch.float64) < p
        if variant in ("row", "dense") and x.dim() >= 1:
            col = torch.randint(0, x.shape[-1], x.shape[:-1] + (1,), generator=g)
            out = out.scatter(-1, col, True)
        if variant in ("empty", "dense"):
            rows = out.reshape(-1, x.shape[-1]) if x.dim() >= 1 else out.reshape(1, 1)
            r = rows.shape[0]
            k = max(1, r // EDGE_ROWS)
            order = torch.randperm(r, generator=g)
            if r == 1:
                rows[0] = variant == "dense"
            else:
                if variant == "empty":
                    rows[order[:k]] = False
                rows[order[k:2 * k]] = True
            out = rows.reshape(x.shape)
        return out
    if variant == "far":
        if x.dtype != torch.int64:
            return x
        r = torch.randint(0, 2**32, x.shape, generator=g, dtype=torch.int64)
        lo, hi = int(x.min()), int(x.max())
        for s in ((1, -1) if int(torch.randint(0, 2, (1,), generator=g)) else (-1, 1)):
            if -2**63 <= lo + s * INT_FAR - 2**32 and hi + s * INT_FAR + 2**32 <= 2**63 - 1:
                return x + s * (INT_FAR + r)
        return x
    if variant == "full":
        if x.dtype == torch.int64 or int(x.min()) == int(x.max()):
            return x
        info = torch.iinfo(x.dtype)
        out = torch.randint(info.min, info.max + 1, x.shape, generator=g, dtype=torch.int64)
        if _sorted_last(x.to(torch.int64)):
            out = out.sort(dim=-1).values
        return out.to(x.dtype)
    if variant == "below":  # a constant count (every length the full length): counts from 1 up to it
        c = int(x.min())
        if c != int(x.max()) or c < 2:
            return x
        u = torch.rand(x.shape, generator=g, dtype=torch.float64)
        return (1 + (u * c).floor().to(torch.int64).clamp(max=c - 1)).to(x.dtype)
    if variant == "above":  # a constant index or type (token types all 0): each element c or c + 1
        c = int(x.min())
        if c != int(x.max()) or c < 0 or c + 1 > torch.iinfo(x.dtype).max:
            return x
        return (c + torch.randint(0, 2, x.shape, generator=g, dtype=torch.int64)).to(x.dtype)
    if variant != "range":
        raise ValueError(f"unknown redraw variant {variant!r} for integers")
    lo, hi = int(x.min()), int(x.max())
    wide = x.to(torch.int64)
    if hi - lo < 2**53:
        u = torch.rand(x.shape, generator=g, dtype=torch.float64)
        out = lo + (u * (hi - lo + 1)).floor().to(torch.int64).clamp(max=hi - lo)
    else:  # a span fp64 cannot draw from: the whole int64 range, clamped to [min, max]
        out = torch.randint(-2**63, 2**63 - 1, x.shape, generator=g, dtype=torch.int64).clamp(lo, hi)
    if _sorted_last(wide):
        out = torch.maximum(out.sort(dim=-1).values, wide[..., :1])
        out[..., 0] = wide[..., 0]
    return out.to(x.dtype)


def redraw(inputs: list, target: int, variant: str, seed: int) -> list:
    """Pure: ``inputs`` with the ``target``-th tensor (in :func:`_tensors` order) replaced by
    :func:`redraw_tensor`; every other value as it is."""
    import torch

    k = [0]

    def tr(x):
        if isinstance(x, torch.Tensor):
            i, k[0] = k[0], k[0] + 1
            return redraw_tensor(x, variant, seed) if i == target else x
        if isinstance(x, (list, tuple)):
            return type(x)(tr(v) for v in x)
        if isinstance(x, dict):
            return {key: tr(v) for key, v in x.items()}
        return x

    return [tr(v) for v in inputs]


def _is_float(x) -> bool:
    return isinstance(x, float)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _numbered(inputs: Any, pred) -> list[int]:
    """Pure: the numbers (in traversal order) of the leaves of ``inputs`` that satisfy ``pred``."""
    n = [0]

    def walk(x):
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif pred(x):
            n[0] += 1

    walk(list(inputs))
    return list(range(n[0]))


def _replace_nth(inputs: list, pred, target: int, fn) -> list:
    """Pure: ``inputs`` with the ``target``-th leaf satisfying ``pred`` (traversal order) replaced by ``fn(leaf)``."""
    k = [0]

    def tr(x):
        if isinstance(x, (list, tuple)):
            return type(x)(tr(v) for v in x)
        if isinstance(x, dict):
            return {key: tr(v) for key, v in x.items()}
        if pred(x):
            i, k[0] = k[0], k[0] + 1
            return fn(x) if i == target else x
        return x

    return [tr(v) for v in inputs]


def _nth_values(inputs: list, pred, target: int) -> list:
    """Pure: ``[the target-th leaf satisfying pred]`` (traversal order, as :func:`_replace_nth` counts), or []."""
    vals: list = []
    _replace_nth(inputs, pred, target, lambda x: vals.append(x) or x)
    return vals


def scalar_targets(inputs: Any) -> list[int]:
    """Pure: the Python floats among the inputs (not bools; ints: :func:`int_targets`), numbered in traversal
    order; a forward argument such as a temperature."""
    return _numbered(inputs, _is_float)


def int_targets(inputs: Any) -> list[int]:
    """Pure: the Python ints among the inputs (not bools), numbered in traversal order: a shift, an offset, a
    count passed to ``forward``. Moved by :func:`move_int` where the reference's output keeps its shapes (an int
    that is a size or a dim changes them, or makes the reference raise, and is not moved)."""
    return _numbered(inputs, _is_int)


def _is_bool(x) -> bool:
    return isinstance(x, bool)


def bool_targets(inputs: Any) -> list[int]:
    """Pure: the Python bools among the inputs, numbered in traversal order: a flag passed to ``forward`` (causal,
    a mode). Flipped by :func:`flip_bool` where the reference's output keeps its shapes (``keepdim`` changes them)."""
    return _numbered(inputs, _is_bool)


def flip_bool(inputs: list, target: int) -> list:
    """Pure: ``inputs`` with the ``target``-th Python bool (:func:`bool_targets`) negated; everything else as it is.
    A flag is an input: a kernel that always applies the causal mask it saw is wrong for the other value (redteam12
    h03)."""
    return _replace_nth(inputs, _is_bool, target, lambda x: not x)


def move_int(inputs: list, target: int, seed: int, frac: float = 1.0) -> list:
    """Pure: ``inputs`` with the ``target``-th Python int (:func:`int_targets`) moved by ``+-m``, m drawn from
    ``seed`` in [1, max(1, frac * |x| / 2)] with a random sign; every other value as it is. A kernel that bakes in
    the value it saw (a roll by 37) fails (redteam9 h03)."""
    import random

    rng = random.Random(seed)
    sign = rng.choice((-1, 1))
    return _replace_nth(inputs, _is_int, target, lambda x: x + sign * rng.randint(1, max(1, int(frac * abs(x) / 2))))


def rescale_int(inputs: list, target: int, up: bool) -> list | None:
    """Pure: ``inputs`` with the ``target``-th Python int (:func:`int_targets`) doubled (``up``) or halved (where it
    is even and not 0), else None. Tried after the drawn moves (:func:`move_int`): an int whose valid values are
    sparse (a group count must divide the channels: 8 and 32 for 16 of 256, none of 17..24) is still moved
    (redteam11 h03 baked in 16 groups; the drawn moves landed on a valid count about 1 time in 16)."""
    vals = _nth_values(inputs, _is_int, target)
    if not vals or (not up and (vals[0] % 2 or vals[0] == 0)) or (up and vals[0] == 0):
        return None
    return _replace_nth(inputs, _is_int, target, lambda x: x * 2 if up else x // 2)


def move_integral(inputs: list, target: int, seed: int, frac: float = 1.0) -> list | None:
    """Pure: ``inputs`` with the ``target``-th Python float (:func:`scalar_targets`) moved by ``+-m`` as
    :func:`move_int` moves an int, where its value is integral (an exponent 3.0, a count 8.0), else None. Such a
    value's domain may be the integers (``pow`` of a negative base is real only there), where every scaling move
    lands off it: redteam10 h01 baked in a cube, since each move of 3.0 made the reference NaN and was dropped."""
    import random

    vals = _nth_values(inputs, _is_float, target)
    if not vals or not math.isfinite(vals[0]) or vals[0] != round(vals[0]) or abs(vals[0]) >= 2.0 ** 52:
        return None
    rng = random.Random(seed)
    sign = rng.choice((-1, 1))
    return _replace_nth(inputs, _is_float, target,
                        lambda x: x + float(sign * rng.randint(1, max(1, int(frac * abs(x) / 2)))))


def rescale_scalar_far(inputs: list, target: int, seed: int, up: bool) -> list:
    """Pure: ``inputs`` with the ``target``-th Python float (:func:`scalar_targets`) multiplied by 2^(+-u), u drawn
    from ``seed`` uniformly in :data:`SCALAR_FAR` (up: +u; 0 becomes 2^(+-u)); every other value as it is. A kernel
    right only on the scalar's neighbourhood (a LeakyReLU as ``fmaxf(x, a * x)``, right only for slopes below 1)
    fails where the reference is still defined (redteam9 h12)."""
    import random

    u = random.Random(seed).uniform(*SCALAR_FAR) * (1.0 if up else -1.0)
    return _replace_nth(inputs, _is_float, target, lambda x: x * 2.0 ** u if x != 0 else 2.0 ** u)


def rescale_scalar(inputs: list, target: int, seed: int, frac: float = 1.0) -> list:
    """Pure: ``inputs`` with the ``target``-th Python float (:func:`scalar_targets`) multiplied by 2^(frac * u),
    u drawn from ``seed`` uniformly in [0.25, 1] with a random sign (0 becomes frac * u); every other value as it
    is. A kernel that bakes in the value it saw (a temperature, an epsilon) fails (redteam7 h08)."""
    import random

    rng = random.Random(seed)
    u = rng.uniform(0.25, 1.0) * rng.choice((-1.0, 1.0)) * frac
    return _replace_nth(inputs, _is_float, target, lambda x: x * 2.0 ** u if x != 0 else u)


def outliers(x, g, factor: float, k: int = OUTLIERS_PER_ROW):
    """Pure (given the generator ``g``): ``x`` with ``k`` elements of every last-dim row, at random positions,
    set to ``s * q``: ``q`` the power of two nearest ``factor`` times the row's rms (of its finite values; 1 for
    an all-zero row), capped at half the dtype's largest finite value, ``s`` a random sign. A few values that
    dominate their row: a max taken over a sample or a prefix, a sum that assumes O(1) elements, a scale taken
    from the first block, are wrong. Complex tensors (redteam8 h07: a row max over the first block of |z|)
    take the magnitude with a random phase. 0-d and empty tensors are returned as they are."""
    import torch

    if x.dim() == 0 or x.numel() == 0:
        return x
    n = x.shape[-1]
    cplx = x.is_complex()
    rows = x.detach().reshape(-1, n).to(torch.complex128 if cplx else torch.float64)
    fin = torch.isfinite(rows)
    z = torch.where(fin, rows, torch.zeros_like(rows))
    rms = (z.abs().pow(2).sum(1) / fin.sum(1).clamp(min=1)).sqrt()
    rms = torch.where(rms > 0, rms, torch.ones_like(rms))
    real = getattr(torch, _REAL_OF.get(str(x.dtype).replace("torch.", ""), str(x.dtype).replace("torch.", "")))
    cap = 2.0 ** math.floor(math.log2(torch.finfo(real).max / 2))
    mag = torch.exp2(torch.round(torch.log2(factor * rms))).clamp(max=cap)
    m = min(k, n)
    pos = torch.rand(rows.shape, generator=g).argsort(dim=1)[:, :m]
    sgn = (torch.randint(0, 2, (rows.shape[0], m), generator=g) * 2 - 1).double()
    if cplx:  # a random phase: a magnitude that dominates its row, whichever part a kernel looks at
        sgn = torch.polar(torch.ones_like(sgn), torch.rand(sgn.shape, generator=g, dtype=torch.float64) * 2 * math.pi)
    out = rows.scatter(1, pos, mag[:, None] * sgn)
    return out.to(x.dtype).reshape(x.shape)


def perturb_params(params: dict, seed: int, rel: float = PARAM_NOISE) -> dict:
    """Pure: every floating/complex tensor of ``params`` (a model's parameters; buffers: :func:`perturb_buffers`) plus
    ``rel * rms(p) * randn`` (``rms`` taken as 1 where it is 0), drawn from ``seed`` in name order; other
    values returned as they are. Default-constant parameters (LayerNorm's weight 1 and bias 0) take
    non-trivial values, so a kernel that assumes them is wrong."""
    import torch

    def move(p, g):
        s = scale_of(p)
        noise = torch.randn(p.shape, generator=g, dtype=torch.complex128 if p.is_complex() else torch.float64)
        return p.detach().cpu().to(noise.dtype) + rel * (s if s > 0 else 1.0) * noise

    return _moved(params, seed, move)


def _moved(tensors: dict, seed: int, move) -> dict:
    """Pure: ``move(t, generator)`` applied to every non-empty floating/complex tensor of ``tensors`` in name
    order (one generator from ``seed``), cast back to its dtype and device; other values as they are."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = {}
    for k in sorted(tensors):
        t = tensors[k]
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) and t.numel():
            out[k] = move(t, g).to(t.dtype).to(t.device)
        else:
            out[k] = t
    return out


def perturb_buffers(buffers: dict, seed: int, rel: float = PARAM_NOISE) -> dict:
    """Pure: every floating/complex tensor of ``buffers`` (a model's persistent buffers: BatchNorm's running
    statistics) moved so that no init value can be assumed, decided by the values, never by names: an all-zero
    buffer (a running mean at init) plus ``rel * randn``; any other buffer times ``exp(rel * randn)``, element by
    element, which keeps every element's sign, its zeros and its infinities (a running variance stays
    positive, a 0/1 or 0/-inf mask keeps its support), and one element in 16 (:data:`QUIET_SHARE`) also times
    2^-16: a near-dead channel, whose variance is of the order of BatchNorm's eps, so a kernel that drops eps is
    wrong there (redteam9 h10: within the budget at variances of 0.2..5). Drawn from ``seed`` in name order;
    other values returned as they are."""
    import torch

    def move(b, g):
        noise = torch.randn(b.shape, generator=g, dtype=torch.float64)
        x = b.detach().cpu().to(torch.complex128 if b.is_complex() else torch.float64)
        if bool((x == 0).all()):
            return x + rel * noise
        quiet = torch.rand(b.shape, generator=g, dtype=torch.float64) < QUIET_SHARE
        return x * torch.exp(rel * noise) * torch.where(quiet, QUIET_SCALE, 1.0)

    return _moved(buffers, seed, move)


DRAWN_RESIDUES = 8  # drawn shape variants: one per non-zero residue mod 8 of the move (a tail of 1..7 elements)
DRAWN_BLOCKS = 8  # ... and the move's 8-element blocks: 0..7 of them, distinct across the variants


def draw_variants(defaults: dict, declared: list, seed: int, m: int = DRAWN_RESIDUES,
                  blocks: int = DRAWN_BLOCKS) -> list[dict]:
    """Pure: the shape variants the harness draws itself: every integer global that the problem's declared
    ``SHAPE_VARIANTS`` already vary (so a solution is expected to handle other values of it), moved from its
    default by ``t`` or ``t - M`` (a random side; the other where it would drop below 1), ``t = r + m*b``,
    one variant per residue ``r`` in 1..m-1, each global taking the residues in its own random order, never
    onto the default or a declared value (that residue skipped for that global). ``b``, the move's whole
    ``m``-blocks, is drawn without replacement from 0..J (repeated in a fresh order when the variants outnumber
    it), J = min(blocks - 1, default // (2m)), and M = m*(J+1), so both sides of a move land on the same
    remainder mod M and no size moves by more than ~default/2 + m. So every global is seen at every remainder
    mod ``m`` of its default, and, where J = 7, at 7 distinct remainders mod 8m in distinct blocks (every block
    offset mod 4m at least once): a kernel right only for some tails of a vector or unroll width up to ``m``
    lanes (redteam6 h04, a tail bug only at COLS % 4 == 2) or up to ``4m`` lanes (redteam7 h05: a 32-wide loop
    wrong on tails of 8..24, which moves of at most 7 never reached) is wrong on one of them. [] when nothing
    qualifies; variants that would move nothing are dropped."""
    import random

    rng = random.Random(seed)
    names = sorted({k for v in declared for k, x in v.items() if isinstance(x, int) and not isinstance(x, bool)})
    order = {}
    for k in names:
        d = defaults.get(k)
        if isinstance(d, int) and not isinstance(d, bool):
            rs = list(range(1, m))
            rng.shuffle(rs)
            top = max(0, min(blocks - 1, d // (2 * m)))
            bs: list[int] = []
            while len(bs) < m - 1:
                pool = list(range(top + 1))
                rng.shuffle(pool)
                bs += pool
            order[k] = (m * (top + 1), [r + m * b for r, b in zip(rs, bs)])
    out = []
    for i in range(m - 1):
        var = {}
        for k, (big, ts) in order.items():
            d, t = defaults[k], ts[i]
            taken = {d} | {v[k] for v in declared if k in v}
            sides = [t, t - big] if rng.random() < 0.5 else [t - big, t]
            for delta in sides:
                n = d + delta
                if n >= 1 and n not in taken:
                    var[k] = n
                    break
        if var:
            out.append(var)
    return out


def perturb(inputs: list, fresh: list, seed: int, n: int = PERTURB_ELEMENTS) -> list:
    """Pure: ``inputs`` with ``n`` elements of every floating tensor replaced by the same elements of
    ``fresh`` (inputs of the same problem and shapes, another draw), at positions drawn from ``seed``: a
    near-repeat that an output cache keyed on a sample of the input cannot tell from the original."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def tr(x, f):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            if not isinstance(f, torch.Tensor) or f.shape != x.shape or f.dtype != x.dtype or x.numel() == 0:
                return x
            idx = torch.randint(0, x.numel(), (min(n, x.numel()),), generator=g)
            out = x.clone()
            flat = out.reshape(-1)  # a copy when ``x`` is not contiguous: written back below
            flat[idx] = f.reshape(-1)[idx]
            if flat.data_ptr() != out.data_ptr():
                out.copy_(flat.view(x.shape))
            return out
        if isinstance(x, (list, tuple)) and isinstance(f, (list, tuple)) and len(x) == len(f):
            return type(x)(tr(a, b) for a, b in zip(x, f))
        if isinstance(x, dict) and isinstance(f, dict) and x.keys() == f.keys():
            return {k: tr(v, f[k]) for k, v in x.items()}
        return x

    return [keep_sorted(a, tr(a, b)) for a, b in zip(inputs, fresh)]


def leaf_dtype_of(*trees: Any) -> str:
    """Pure: the widest floating dtype among the tensors of ``trees`` (inputs, weights); "float64" when there
    is none. The precision in which a reference computes a Python-float output from them."""
    order = ["float16", "bfloat16", "float32", "float64"]
    names = {_REAL_OF.get(n, n) for t in _tensors(trees) if t.is_floating_point() or t.is_complex()
             for n in [str(t.dtype).replace("torch.", "")]}
    known = [order.index(n) for n in names if n in order]
    return order[max(known)] if known else "float64"


LEAF_SAFETY = 8.0  # the measured error of a Python-float leaf must fit its budget this many times over
# a Python-float leaf's absolute slack: this many times the reference's own rounding error there (leaf_noise).
# Measured on tests/adversarial/problems/zmean_leaf.py (the mean of a row-standardised tensor, true value 0, 15 draws
# of N(0, 1), 32 N(0, 1) and N(0, 1) + 32): a float32 kernel with sequential sums used at most 0.53 of 32x, on a
# shifted draw; at 128x a 4-draw estimate must fall below 0.13 of its mean to reject it (p ~ 6e-4 for chi^2_4)
LEAF_NOISE = 128.0


def with_leaf_slack(scales: Any, expected: Any, slack: dict, path: str = "out") -> Any:
    """Pure: ``scales`` (:func:`scales_tree`, or None) with each Python-float leaf of ``expected`` replaced by its
    slack from ``slack`` (by :func:`float_leaves` path; a leaf it does not name keeps None)."""
    if isinstance(expected, float):
        return slack.get(path)
    if isinstance(expected, (list, tuple)):
        return [with_leaf_slack(scales[i] if isinstance(scales, (list, tuple)) else None, v, slack, f"{path}[{i}]")
                for i, v in enumerate(expected)]
    if isinstance(expected, dict):
        return {k: with_leaf_slack(scales.get(k) if isinstance(scales, dict) else None, v, slack, f"{path}[{k!r}]")
                for k, v in expected.items()}
    return scales


def leaf_noise(outs: list, outs64: list) -> dict[str, float]:
    """Pure: for each Python-float leaf (by :func:`float_leaves` path) of the reference's outputs ``outs`` (one
    per draw of inputs), the rms over the draws of its own rounding error, ``outs[k] - outs64[k]`` (``outs64``: the
    float64 reference on the same inputs; a draw where either is missing or not finite is skipped). Where a leaf's
    true value is 0 for any input (the mean of a row-standardised tensor) that error is all it is, and no relative
    budget covers it (redteam10 hn19); a float64 leaf has none, so it gets no slack. Several draws, not one: a
    single draw's error can be small by chance. A leaf with no usable draw is 0."""
    acc: dict[str, list] = {}
    for o, o64 in zip(outs, outs64):
        got64 = dict(float_leaves(o64)) if o64 is not None else {}
        for p, v in float_leaves(o):
            w = got64.get(p)
            d = acc.setdefault(p, [0.0, 0])
            if isinstance(w, float) and math.isfinite(w) and math.isfinite(v):
                d[0] += (v - w) ** 2
                d[1] += 1
    return {p: math.sqrt(s2 / n) if n else 0.0 for p, (s2, n) in acc.items()}


def _looser(a: str | None, b: str | None, preset: str = "default") -> str | None:
    """Pure: of two dtype names, the one with the larger budget (``atol + rtol``; ties: ``a``); None is ignored."""
    if a is None or b is None:
        return b if a is None else a
    return b if sum(tolerance_for(b, preset)) > sum(tolerance_for(a, preset)) else a


def float_leaves(x: Any, path: str = "out"):
    """The Python-float leaves of a nested output as (path, value), paths as :func:`compare` writes them."""
    if isinstance(x, float):
        yield path, x
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from float_leaves(v, f"{path}[{i}]")
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from float_leaves(v, f"{path}[{k!r}]")


def _leaf_at(x: Any, path: str, root: str = "out") -> Any:
    return dict(float_leaves(x, root)).get(path) if x is not None else None


def measured_dtype(e: float, e64: Any, preset: str = "default", safety: float = LEAF_SAFETY) -> str | None:
    """Pure: the dtype with the tightest budget (float64, float32, float16, bfloat16) that covers ``safety``
    times the reference's own error ``|e - e64|`` (``e64``: the same leaf with inputs and weights in float64),
    bfloat16 where none does; None where ``e64`` is not a finite float (no float64 reference)."""
    if not isinstance(e64, float) or not math.isfinite(e64) or not math.isfinite(e):
        return None
    err = safety * abs(e - e64)
    for d in sorted(("float64", "float32", "float16", "bfloat16"), key=lambda n: sum(tolerance_for(n, preset))):
        a, r = tolerance_for(d, preset)
        if err <= (a + r) * abs(e):
            return d
    return "bfloat16"


def source_dtype(e: float, sources: list) -> str | None:
    """Pure: the dtype of the tensor a Python-float leaf was read from. ``sources``: ``(dtype name, value)`` of
    every floating tensor the reference read as a Python number (:func:`scalar_sources`), in order: the last one
    whose value is the leaf's; where none is (the leaf was computed from them in Python), the one with the
    largest budget; None where there are none."""
    fl = [(d, v) for d, v in sources if d in ("float64", "float32", "float16", "bfloat16") and v is not None]
    for d, v in reversed(fl):
        if v == e:
            return d
    out = None
    for d, _ in fl:
        out = _looser(out, d)
    return out


def leaf_dtypes(refs: list, refs64: list, sources: list, fallback: str, preset: str = "default",
                safety: float = LEAF_SAFETY) -> dict[str, str]:
    """Pure: for every Python-float leaf of the reference's outputs ``refs`` (one per trial; ``refs64``: the
    same with inputs and weights in float64, None where that raised), the dtype whose budget it is held to: the
    looser of the dtype of the tensor it was read from (:func:`source_dtype` over ``sources``, the first
    trial's reads: a leaf is never more precise than that) and the dtype measured from the reference's own
    error against float64 (:func:`measured_dtype`, the loosest over the trials: a reduced-precision step the
    source's dtype hides, ``x.sum().float()`` of bfloat16 ``x``, is measured), and never tighter than a
    downcast inside the reference (``(dtype, None)`` in ``sources``: the float64 twin casts too, so
    ``x.bfloat16().sum().float()`` is not measured but recorded). A leaf with no source (not read by
    ``.item()``/``float()``) stands in ``fallback`` for it (the widest floating dtype of inputs and weights,
    :func:`leaf_dtype_of`); where no leaf has a float64 twin (the reference raises in float64), the looser of
    the source's dtype and ``fallback`` (the rule before the measurement)."""
    out: dict[str, str] = {}
    for path, e in float_leaves(refs[0]) if refs else ():
        meas = None
        for r, r64 in zip(refs, refs64):
            v = _leaf_at(r, path)
            if isinstance(v, float):
                meas = _looser(meas, measured_dtype(v, _leaf_at(r64, path), preset, safety), preset)
        src = source_dtype(e, sources)
        if meas is None:  # no float64 reference: the source's dtype, never tighter than the inputs' widest
            d = _looser(src, fallback, preset)
        else:
            d = _looser(src if src is not None else fallback, meas, preset)
        for c, v in sources:  # a downcast inside the reference: the twin casts too, so it is not measured
            if v is None and c in ("float64", "float32", "float16", "bfloat16"):
                d = _looser(d, c, preset)
        out[path] = d
    return out


def unread_state(model, *args) -> tuple[Any, list[str]]:
    """``model(*args)`` with the keys of ``model``'s state dict whose tensors no op of that call reads (by
    storage, every argument of every dispatched op): eval-mode BatchNorm's ``num_batches_tracked``. A candidate
    need not hold them (``worker.positional_state``). The values are not changed."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    seen: set[int] = set()

    class _Reads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            for t in tree_leaves((args, kwargs)):
                if isinstance(t, torch.Tensor):
                    seen.add(t.untyped_storage().data_ptr())
            return func(*args, **(kwargs or {}))

    with _Reads():
        out = model(*args)
    return out, [k for k, v in model.state_dict().items()
                 if v.numel() and v.untyped_storage().data_ptr() not in seen]


def scalar_sources(fn, *args) -> tuple[Any, list]:
    """``fn(*args)`` with a record, in order, of every floating tensor it read as a Python number
    (``aten._local_scalar_dense``: ``.item()``, ``float()``) as ``(dtype name, value)``, and of every downcast
    (an op whose floating output has a looser budget than its widest floating input: ``.bfloat16()``, a copy
    into a narrower tensor) as ``(output dtype name, None)``: a precision the float64 twin cannot measure,
    because it casts too. The values are not changed."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    seen: list = []

    def name(t) -> str:
        n = str(t.dtype).replace("torch.", "")
        return _REAL_OF.get(n, n)

    def floats(x) -> list:
        return [t for t in tree_leaves(x) if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())]

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._local_scalar_dense.default:
                if isinstance(args[0], torch.Tensor) and (args[0].is_floating_point() or args[0].is_complex()):
                    seen.append((name(args[0]), out))
                return out
            ins = [name(t) for t in floats((args, kwargs))]
            if ins:
                tightest = min(sum(tolerance_for(n)) for n in ins)
                for t in floats(out):
                    if sum(tolerance_for(name(t))) > tightest:
                        seen.append((name(t), None))
            return out

    with _Record():
        res = fn(*args)
    return res, seen


def has_int(x: Any) -> bool:
    """Are there integer tensors (bool excluded) in ``x``?"""
    return any(not (t.is_floating_point() or t.is_complex()) and str(t.dtype) != "torch.bool" for t in _tensors(x))


def has_int64(x: Any) -> bool:
    import torch

    if isinstance(x, torch.Tensor):
        return x.dtype == torch.int64
    if isinstance(x, (list, tuple)):
        return any(has_int64(v) for v in x)
    if isinstance(x, dict):
        return any(has_int64(v) for v in x.values())
    return False


def _tensors(x: Any):
    """The tensors of a nested output or input structure (lists, tuples, dicts), in order."""
    import torch

    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def owned_copy(x: Any) -> Any:
    """Pure: ``x`` with every tensor cloned (detached) and every tuple subclass (``torch.return_types.sort``, a
    namedtuple) a plain tuple, lists and dicts rebuilt: what the harness keeps of a reference call's inputs and
    outputs. A reference that works in place on its inputs (``x.mul_(w)``) or returns a tensor it owns (an
    ``out=`` buffer, reused on every call) changes neither the round's inputs nor an earlier expected value, and
    a structseq output compares with the plain tuple a worker's output is rebuilt as (redteam9 p01, p02, p06)."""
    import torch

    if isinstance(x, torch.Tensor):
        return _clone_layout(x.detach())
    if isinstance(x, (list, tuple)):
        items = [owned_copy(v) for v in x]
        return items if isinstance(x, list) else tuple(items)
    if isinstance(x, dict):
        return {k: owned_copy(v) for k, v in x.items()}
    return x


def _clone_layout(x):
    """Pure: a copy of ``x`` with the same sizes and strides (an ``expand()`` view keeps its stride 0, padded rows
    their padding): the span of storage it covers is copied and viewed as ``x`` views it (``clone`` would make a
    non-dense tensor contiguous, and the harness compares the candidate's output layout with the reference's)."""
    if x.is_contiguous() or x.numel() == 0 or x.dim() == 0:
        return x.clone()
    span = 1 + sum((n - 1) * st for n, st in zip(x.shape, x.stride()))
    flat = x.as_strided((span,), (1,), x.storage_offset()).clone()
    return flat.as_strided(x.shape, x.stride(), 0)


def versions(x: Any) -> list[int]:
    """The version counters of the tensors of ``x``, in order: torch bumps a tensor's at every in-place write,
    whatever the values written (a guard ``clamp_`` that changes nothing still writes; redteam10 hn22). -1 for a
    tensor without one (an inference tensor)."""
    out = []
    for t in _tensors(x):
        try:
            out.append(int(t._version))
        except RuntimeError:
            out.append(-1)
    return out


def same_tensors(a: Any, b: Any) -> bool:
    """Pure: do two structures hold tensors with equal values, bit for bit (NaN equal to NaN)?"""
    import torch

    ta, tb = list(_tensors(a)), list(_tensors(b))
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            x, y = wide(x), wide(y)
            if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def shapes_of(x: Any) -> list:
    """Pure: the (shape, dtype) of every tensor of a structure, in order, and the type of every other leaf."""
    import torch

    if isinstance(x, torch.Tensor):
        return [(tuple(x.shape), x.dtype)]
    if isinstance(x, (list, tuple)):
        return [s for v in x for s in shapes_of(v)]
    if isinstance(x, dict):
        return [s for v in x.values() for s in shapes_of(v)]
    return [type(x).__name__]


def has_float(x: Any) -> bool:
    return any(t.is_floating_point() or t.is_complex() for t in _tensors(x))


def all_discrete(x: Any) -> bool:
    """Are all tensor outputs integer/bool (indices, masks)?"""
    return not has_float(x)


def finite_where(ref, ref64) -> bool:
    """Is ``ref`` finite wherever ``ref64`` is (and are both structures alike)?"""
    import torch

    if isinstance(ref, torch.Tensor):
        if not isinstance(ref64, torch.Tensor) or ref.shape != ref64.shape:
            return False
        if not (ref.is_floating_point() or ref.is_complex()):
            return True
        return bool((torch.isfinite(wide(ref)) | ~torch.isfinite(wide(ref64))).all())
    if isinstance(ref, (list, tuple)):
        return isinstance(ref64, (list, tuple)) and len(ref) == len(ref64) and all(finite_where(a, b) for a, b in zip(ref, ref64))
    if isinstance(ref, dict):
        return isinstance(ref64, dict) and ref.keys() == ref64.keys() and all(finite_where(v, ref64[k]) for k, v in ref.items())
    return True


def infinities_agree(ref, ref64) -> bool:
    """Pure: no NaN in ``ref64``'s floating tensors, and wherever ``ref64`` is infinite ``ref`` holds the same
    infinity. A reference with infinities by design (a masked log-softmax's -inf) keeps them under a transform
    exactly where its float64 twin does: such a round is well defined (redteam10 h04: every transform of a masked
    log-softmax was dropped, and a log-softmax without its max subtraction passed)."""
    import torch

    ta, tb = list(_tensors(ref)), list(_tensors(ref64))
    if len(ta) != len(tb):
        return False
    for a, b in zip(ta, tb):
        if not (b.is_floating_point() or b.is_complex()):
            continue
        if a.shape != b.shape:
            return False
        a, b = wide(a), wide(b)
        if bool(torch.isnan(b).any()):
            return False
        inf = torch.isinf(b)
        if bool(inf.any()) and not bool((a[inf] == b[inf].to(a.dtype)).all()):
            return False
    return True


def to_dtype_of(x64: Any, like: Any) -> Any:
    """Cast an fp64 reference output back to the reference's dtypes (for comparison)."""
    import torch

    if isinstance(like, torch.Tensor) and isinstance(x64, torch.Tensor):
        return x64.to(like.dtype)
    if isinstance(like, (list, tuple)) and isinstance(x64, (list, tuple)):
        return type(like)(to_dtype_of(a, b) for a, b in zip(x64, like))
    if isinstance(like, dict) and isinstance(x64, dict):
        return {k: to_dtype_of(x64[k], like[k]) for k in like}
    return x64


def _flat_float(x: Any):
    return [wide(t) for t in _tensors(x) if t.is_floating_point() and t.numel()]


def wide(t):
    """A float8 tensor as float32 (exact: every float8 value is a float32), any other tensor as it is: torch's
    CPU kernels lack most ops on float8 (``isfinite``, ``le``), so the parent computes on its float32 twin."""
    return t.float() if t.dtype.itemsize == 1 and t.is_floating_point() else t


def degeneracy(out: Any, atol: float, rtol: float) -> str | None:
    """Pure: ``"all_zero"`` / ``"constant"`` if every floating tensor in ``out`` is (within an absolute
    ``atol``) zero / a single constant, else None. Fewer than 2 elements are never degenerate."""
    import torch

    ts = _flat_float(out)
    if not ts or sum(t.numel() for t in ts) < 2:
        return None
    if all(bool((t.abs() <= atol).all()) for t in ts):
        return "all_zero"
    for t in ts:
        if not bool(torch.isfinite(t).all()):
            return None
        m = float(t.double().mean())
        if t.numel() < 2 or float((t - m).abs().max()) > atol + rtol * abs(m):
            return None
    return "constant"


def same_outputs(a: Any, b: Any, atol: float, rtol: float) -> bool:
    """Pure: are two outputs indistinguishable within tolerance (used for input-sensitivity)."""
    ta, tb = _flat_float(a), _flat_float(b)
    if len(ta) != len(tb) or not ta:
        return False
    return all(x.shape == y.shape and mismatches(x, y, atol, rtol)[0] == 0 for x, y in zip(ta, tb))
