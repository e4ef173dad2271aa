"""HONEST (p09_floordiv_int; twin of h09): floor division and Python-style remainder for every sign, with the
INT_MIN / -1 case wrapped as torch does (two's complement) instead of trapping. Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void divmod_floor(const int32_t* a, const int32_t* b, int32_t* q, int32_t* r, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        int32_t x = a[i], y = b[i];
        if (y == -1) { q[i] = (int32_t)(0u - (uint32_t)x); r[i] = 0; continue; }
        int32_t qq = x / y, rr = x % y;
        if (rr != 0 && ((rr < 0) != (y < 0))) { qq -= 1; rr += y; }
        q[i] = qq;
        r[i] = rr;
    }
}
"""

_lib = load_c(name="divmod_floor", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        q = torch.empty_like(a)
        r = torch.empty_like(a)
        _lib.divmod_floor(a, b, q, r, a.numel())
        return q, r
