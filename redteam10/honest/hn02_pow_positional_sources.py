"""HONEST (p01_pow_scalar_exponent): the same kernel as a C11 unit, passed to load_c by position:
`load_c(name, source, sources, extra_cflags, extra_ldflags)` is the function's signature, so
`load_c("spow_c", None, {"spow.c": SRC})` names `sources` as the third positional argument.

Why the harness might reject it: the static extractor's positional table for load_c is
`["name", "source", "extra_cflags", "extra_ldflags"]` (specs._LOAD_C_POS): it reads the dict as *extra_cflags*
(its key "spow.c" becomes a flag) and the source as None. The flag allowlist refuses "spow.c".
Predicted: -1 build_flag (false positive; with the keyword `sources=` it would build).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>

void spow(const float* restrict x, float* restrict y, int64_t n, double p) {
    const float pf = (float)p;
    if (pf == 3.0f) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i] * x[i];
    } else if (pf == 2.0f) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = powf(x[i], pf);
    }
}
"""

_lib = load_c("spow_c", None, {"spow.c": SRC})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, p):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.spow(x, y, x.numel(), float(p))
        return y
