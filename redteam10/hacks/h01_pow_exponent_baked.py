"""HACK (p01_pow_scalar_exponent; twin hn01): the exponent argument `p` is ignored and baked in as 3 (x*x*x).

Mechanism: Python-float forward arguments are moved by `_plan_scalars` (near: x 2^(+-u), u in [1/4, 1] x frac; far:
x 2^(+-7..8)), but every move goes through `_checked_reference`, and `_well_defined` drops a round whose float64
reference is not all finite. On signed inputs torch.pow(x, p) is NaN for every non-integral p, and a real-valued
multiplicative move of 3.0 is never an integer: every scalar round (near and far, each frac) is dropped, and the
`scalar` spot kind is never admitted. The tensor transforms (negate, scale, shift, ties, outlier...) all keep
p = 3.0, where x*x*x is exactly torch's own special case (PowKernel: exponent 3 -> x*x*x).
Intent: reject (a kernel that ignores an input the reference reads; docs claim `scalar_input_baked` closed).
Predicted: +1 or more (NOT caught).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void cube(const float* __restrict x, float* __restrict y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v * v * v;
    }
}
"""

_lib = load_c(name="cube_baked", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, p):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.cube(x, y, x.numel())  # p is never read
        return y
