"""Pure correctness functions: tolerances, output comparison, degenerate-output tests, seed mixing."""

from __future__ import annotations

import math
from typing import Any

# per-dtype (atol, rtol)
TOLERANCE_PRESETS: dict[str, dict[str, tuple[float, float]]] = {
    "default": {"float32": (1e-4, 1e-4), "float64": (1e-7, 1e-7), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)},
    "cuda_agent": {"float32": (1e-2, 1e-2), "float64": (1e-2, 1e-2), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)},
    "strict": {"float32": (1e-5, 1e-5), "float64": (1e-9, 1e-9), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)},
}


def tolerance_for(dtype_name: str, preset: str = "default", atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    if preset not in TOLERANCE_PRESETS:
        raise ValueError(f"unknown tolerance preset {preset!r}; valid: {', '.join(TOLERANCE_PRESETS)}")
    a, r = TOLERANCE_PRESETS[preset].get(dtype_name, (0.0, 0.0))  # integer/bool dtypes: exact
    return (a if atol is None else atol), (r if rtol is None else rtol)


def mix_seed(public: int, secret: int) -> int:
    """Cantor pairing of a public and a secret seed (GPU MODE style), folded into 63 bits."""
    a, b = int(public), int(secret)
    return ((a + b) * (a + b + 1) // 2 + b) % (2**63 - 1)


def compare(expected: Any, actual: Any, preset: str = "default", atol: float | None = None, rtol: float | None = None,
            path: str = "out") -> tuple[str | None, str, float]:
    """Compare nested outputs. Returns (finding code or None, message, max abs diff).

    Exact type equality (no tensor subclasses, tuple != list), shape, dtype and device; floating tensors
    with ``allclose(equal_nan=True)``: NaN must sit exactly where the reference has NaN.
    """
    import torch

    if type(actual) is not type(expected):
        return "output_type", f"{path}: type {type(actual).__name__} != {type(expected).__name__}", math.inf
    if isinstance(expected, torch.Tensor):
        for attr in ("shape", "dtype", "device"):
            if getattr(actual, attr) != getattr(expected, attr):
                return "output_type", f"{path}: {attr} {getattr(actual, attr)} != {getattr(expected, attr)}", math.inf
        if expected.layout != actual.layout:
            return "output_type", f"{path}: layout {actual.layout} != {expected.layout}", math.inf
        if expected.numel() == 0:
            return None, "", 0.0
        if expected.is_floating_point() or expected.is_complex():
            a, r = tolerance_for(str(expected.dtype).replace("torch.", ""), preset, atol, rtol)
            bad, maxdiff = mismatches(expected, actual, a, r)
            if bad:
                return "output_mismatch", f"{path}: {bad}/{expected.numel()} elements differ (max abs diff {maxdiff:.3g}, atol={a:g}, rtol={r:g})", maxdiff
            return None, "", maxdiff
        if not torch.equal(actual, expected):
            return "output_mismatch", f"{path}: integer/bool tensor differs", math.inf
        return None, "", 0.0
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return "output_type", f"{path}: length {len(actual)} != {len(expected)}", math.inf
        worst = 0.0
        for i, (e, a) in enumerate(zip(expected, actual)):
            code, msg, d = compare(e, a, preset, atol, rtol, f"{path}[{i}]")
            if code:
                return code, msg, d
            worst = max(worst, d)
        return None, "", worst
    if isinstance(expected, dict):
        if set(actual) != set(expected):
            return "output_type", f"{path}: keys {sorted(actual)} != {sorted(expected)}", math.inf
        worst = 0.0
        for k in expected:
            code, msg, d = compare(expected[k], actual[k], preset, atol, rtol, f"{path}[{k!r}]")
            if code:
                return code, msg, d
            worst = max(worst, d)
        return None, "", worst
    if isinstance(expected, float):
        a, r = tolerance_for("float64" if preset != "cuda_agent" else "float32", preset, atol, rtol)
        ok = abs(actual - expected) <= a + r * abs(expected) or (math.isnan(actual) and math.isnan(expected))
        return (None, "", abs(actual - expected)) if ok else ("output_mismatch", f"{path}: {actual} != {expected}", abs(actual - expected))
    if actual != expected:
        return "output_mismatch", f"{path}: {actual!r} != {expected!r}", math.inf
    return None, "", 0.0


def mismatches(expected, actual, atol: float, rtol: float) -> tuple[int, float]:
    """Pure: (number of elements outside ``|a - e| <= atol + rtol*|e|``, max finite |a - e|).
    Same semantics as ``torch.isclose(equal_nan=True)``: NaN only matches NaN, inf only the same inf."""
    import torch

    diff = (actual - expected).abs()
    ok = diff <= atol + rtol * expected.abs()
    ok |= actual == expected  # equal infinities
    ok |= torch.isnan(actual) & torch.isnan(expected)
    bad = int((~ok).sum())
    finite = diff[torch.isfinite(diff)]
    maxdiff = float(finite.max()) if finite.numel() else (0.0 if not bad else float("inf"))
    if bad and maxdiff == 0.0:
        maxdiff = float("inf")
    return bad, maxdiff


def _flat_float(x: Any):
    import torch

    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() and x.numel() else []
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat_float(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat_float(v)]
    return []


def degeneracy(out: Any, atol: float, rtol: float) -> str | None:
    """Pure: ``"all_zero"`` / ``"constant"`` if every floating tensor in ``out`` is (within tolerance) zero /
    a single constant, else None. Outputs with fewer than 2 elements are never degenerate (scalar losses)."""
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
    return None


def same_outputs(a: Any, b: Any, atol: float, rtol: float) -> bool:
    """Pure: are two outputs indistinguishable within tolerance (used for input-sensitivity)."""

    ta, tb = _flat_float(a), _flat_float(b)
    if len(ta) != len(tb) or not ta:
        return False
    return all(x.shape == y.shape and mismatches(x, y, atol, rtol)[0] == 0 for x, y in zip(ta, tb))


def layout_problem(out: Any) -> str | None:
    """Pure: why an output's memory layout is not a materialised result (a stride-0 dimension of size > 1,
    i.e. an ``expand()`` view, or a storage smaller than the elements need), else None."""
    import torch

    if isinstance(out, torch.Tensor):
        if out.numel() <= 1:
            return None
        for d, (n, st) in enumerate(zip(out.shape, out.stride())):
            if n > 1 and st == 0:
                return f"output dim {d} has stride 0 (an expand() view, not a materialised output)"
        span = 1 + sum((n - 1) * abs(st) for n, st in zip(out.shape, out.stride()))
        if span < out.numel():
            return "output elements overlap in memory"
        return None
    if isinstance(out, (list, tuple)):
        for v in out:
            m = layout_problem(v)
            if m:
                return m
    if isinstance(out, dict):
        for v in out.values():
            m = layout_problem(v)
            if m:
                return m
    return None
