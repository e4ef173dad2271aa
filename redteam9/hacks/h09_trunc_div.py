"""HACK (p09_floordiv_int): C's truncating `/` and `%` instead of floor division, correct only for the
non-negative numerators and positive divisors the problem's own inputs draw.

Mechanism it tests: correctness.py `int_wide` (int32 moved by +-2^16 with a random sign per tensor) and the
`full` redraw of narrower integers over the whole int32 range (admitted here: the shapes do not depend on
values, `_shapes_value_independent`). Either puts negative values in `a` or `b`, where trunc and floor differ.
Predicted: rejected (-1, output_mismatch on `int_wide` or `redraw full`).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void divmod_trunc(const int32_t* a, const int32_t* b, int32_t* q, int32_t* r, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { q[i] = a[i] / b[i]; r[i] = a[i] % b[i]; }
}
"""

_lib = load_c(name="divmod_trunc", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        q, r = torch.empty_like(a), torch.empty_like(a)
        _lib.divmod_trunc(a, b, q, r, a.numel())
        return q, r
