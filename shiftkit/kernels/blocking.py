"""Runtime op blocking at the dispatcher level: an advisory first line inside the worker.

It names the torch op a forward fell back to (``blocked_torch_op: aten.mul``), which helps an honest agent;
it decides nothing the candidate could undo: the worker is untrusted, and torch compute is detected where it
cannot be rebound, by the parent's sampling and the linked-symbol allowlist.

While ``ModelNew.forward`` runs, :class:`OpBlocker` (a ``TorchDispatchMode``) sees every ATen op that
reaches the dispatcher, from Python *and* from C++ extension code (``at::relu`` inside a binding is
caught too). Only allocation (with its initialisation: ``torch.full``, ``ones``, ``zeros``), views, metadata and
data movement are allowed; ops in namespaces other
than torch's own (the solution's ``TORCH_LIBRARY`` custom ops) are allowed. Every other op is recorded
(op name -> count) and raises, so a forward that silently falls back to torch fails and is reported by
name. Lean C ABI kernels are called through ctypes and never touch the dispatcher.
"""

from __future__ import annotations

from collections import Counter

TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "mkldnn", "mkl", "_quantized", "quantized_decomposed",
                    "rngprims", "inductor", "c10d", "_c10d_functional", "debugprims", "torchvision"})

ALLOWED_ATEN = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "zeros", "zeros_like",
    "new_zeros", "zero_", "fill_", "fill", "full", "full_like", "new_full", "ones", "ones_like", "new_ones",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "resize_",  # allocation and its initialisation: no compute
    # views
    "view", "_unsafe_view", "as_strided", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "select",
    "slice", "narrow", "alias", "detach", "unbind", "split", "split_with_sizes", "chunk", "view_as", "unfold",
    "_reshape_alias", "reshape", "flatten", "unflatten", "movedim", "expand_as", "diagonal", "_unsafe_index",
    "view_as_real", "view_as_complex", "real", "imag", "_conj", "conj", "_neg_view", "resolve_conj", "resolve_neg",
    "squeeze_", "unsqueeze_", "transpose_", "t_", "as_strided_", "swapaxes", "swapdims", "mT", "adjoint",
    # metadata
    "size", "stride", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "numel", "is_contiguous",
    "is_same_size", "_local_scalar_dense", "is_nonzero", "storage_offset", "_has_compatible_shallow_copy_type",
    # data movement / layout
    "clone", "copy_", "contiguous", "_copy_from", "_copy_from_and_resize", "set_",
    "_to_copy", "to", "_to_dtype",  # a dtype conversion (`.float()`, `.to(torch.int32)`), as copy_ converts (redteam8 hn12)
})


class BlockedOpError(RuntimeError):
    pass


def is_allowed(op_namespace: str, op_base_name: str, allowed_aten: frozenset = ALLOWED_ATEN,
               torch_namespaces: frozenset = TORCH_NAMESPACES) -> bool:
    """Pure: may an op run inside ModelNew.forward? (Custom ops are further restricted to native ones.)"""
    if op_namespace not in torch_namespaces:
        return True  # the solution's own custom ops
    return op_namespace == "aten" and op_base_name in allowed_aten


def make_blocker():
    """The blocker, bound at creation: the allowlists are frozen and captured here, so changing the module's
    names later (e.g. at candidate import time) changes nothing. Custom ops are allowed only if they were
    registered by the built extensions before any candidate Python ran (``allow_native``): an op defined
    with ``torch.library`` in Python (which could hide torch ops) is a violation."""
    from torch.utils._python_dispatch import TorchDispatchMode

    allowed_aten, namespaces, check = ALLOWED_ATEN, TORCH_NAMESPACES, is_allowed

    class OpBlocker(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.violations: Counter = Counter()
            self.python_ops: Counter = Counter()
            self.native: frozenset | None = None
            self.native_calls = 0

        def allow_native(self, op_names) -> None:
            if self.native is None:
                self.native = frozenset(op_names)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ns = getattr(func, "namespace", "aten")
            base = func.__name__.split(".")[0]
            if not check(ns, base, allowed_aten, namespaces):
                name = f"{ns}.{base}"
                self.violations[name] += 1
                raise BlockedOpError(f"torch op {name} is not allowed inside ModelNew.forward")
            if ns not in namespaces:
                if self.native is None or f"{ns}::{base}" not in self.native:
                    self.python_ops[f"{ns}::{base}"] += 1
                    raise BlockedOpError(f"custom op {ns}::{base} was not registered by a built extension")
                self.native_calls += 1
            return func(*args, **(kwargs or {}))

    return OpBlocker()
