"""Honest (redteam9 hn03, problem prealloc_addcmul): a plain kernel; the reference returns a buffer it owns.

As written by redteam9:
HONEST (p02_prealloc_out): addcmul into a fresh output, x + 0.5 * y * z.

Why the harness might reject it: the reference returns the same buffer object on every call, so
evaluate.py `admit_problem`'s two reference outputs are one tensor (holding the second call's values) and
`C.same_outputs` finds the output "does not change with the inputs": degenerate_problem for every solution.
(Past admission, every round's stored `expected` would alias that buffer too and hold the last planned
call's values.) Predicted: 0 (degenerate_problem) instead of +1: a false rejection of a correct kernel.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void addcmul_half(const float* x, const float* y, const float* z, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] + 0.5f * (y[i] * z[i]);
}
"""

_lib = load_c(name="addcmul_half", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, n, m):
        super().__init__()

    def forward(self, x, y, z):
        x, y, z = x.contiguous(), y.contiguous(), z.contiguous()
        out = torch.empty_like(x)
        _lib.addcmul_half(x, y, z, out, x.numel())
        return out
