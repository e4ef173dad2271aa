"""Runtime op blocking at the dispatcher level.

While ``ModelNew.forward`` runs, :class:`OpBlocker` (a ``TorchDispatchMode``) sees every ATen op that
reaches the dispatcher, from Python *and* from C++ extension code (``at::relu`` inside a binding is
caught too). Only allocation, views, metadata and data movement are allowed; ops in namespaces other
than torch's own (the solution's ``TORCH_LIBRARY`` custom ops) are allowed. Every other op is recorded
(op name -> count) and raises, so a forward that silently falls back to torch fails and is reported by
name. Lean C ABI kernels are called through ctypes and never touch the dispatcher.
"""

from __future__ import annotations

from collections import Counter

TORCH_NAMESPACES = {"aten", "prims", "prim", "quantized", "mkldnn", "mkl", "_quantized", "quantized_decomposed",
                    "rngprims", "inductor", "c10d", "_c10d_functional", "debugprims", "torchvision"}

ALLOWED_ATEN = {
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "zero_", "fill_", "scalar_tensor", "lift_fresh", "lift_fresh_copy", "resize_",
    # views
    "view", "_unsafe_view", "as_strided", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "select",
    "slice", "narrow", "alias", "detach", "unbind", "split", "split_with_sizes", "chunk", "view_as", "unfold",
    "_reshape_alias", "reshape", "flatten", "unflatten", "movedim", "expand_as", "diagonal", "_unsafe_index",
    # metadata
    "size", "stride", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "numel", "is_contiguous",
    "is_same_size", "_local_scalar_dense", "is_nonzero", "storage_offset", "_has_compatible_shallow_copy_type",
    # data movement / layout
    "clone", "copy_", "contiguous", "_copy_from", "_copy_from_and_resize", "set_",
}


class BlockedOpError(RuntimeError):
    pass


def is_allowed(op_namespace: str, op_base_name: str) -> bool:
    """Pure: may an op run inside ModelNew.forward?"""
    if op_namespace not in TORCH_NAMESPACES:
        return True  # the solution's own custom ops
    return op_namespace == "aten" and op_base_name in ALLOWED_ATEN


def make_blocker():
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpBlocker(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.violations: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ns = getattr(func, "namespace", "aten")
            base = func.__name__.split(".")[0]
            if not is_allowed(ns, base):
                name = f"{ns}.{base}"
                self.violations[name] += 1
                raise BlockedOpError(f"torch op {name} is not allowed inside ModelNew.forward")
            return func(*args, **(kwargs or {}))

    return OpBlocker()
