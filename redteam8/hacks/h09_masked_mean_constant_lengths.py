"""HACK (reject, twin honest/hn09_masked_mean_c.py; KNOWN GAP "a constant integer input shows no domain and is
never varied"): ignores `lengths`, plain mean over all T steps.

p9's lengths are all T. The redraw skips a constant tensor; int_wide / far move it by +-2^32 / beyond 2^53: the
+ side makes every mask row all-True (this kernel is then right), the - side makes every row empty and the
reference 0/0 = NaN, which is not admitted. No round ever shows a shorter sequence.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void time_mean(const float* x, float* y, int64_t b, int64_t t, int64_t d) {
    for (int64_t i = 0; i < b; ++i) {
        float* yr = y + i * d;
        for (int64_t k = 0; k < d; ++k) yr[k] = 0.f;
        for (int64_t s = 0; s < t; ++s) {
            const float* xr = x + (i * t + s) * d;
            for (int64_t k = 0; k < d; ++k) yr[k] += xr[k];
        }
        const float inv = 1.0f / (float)t;
        for (int64_t k = 0; k < d; ++k) yr[k] *= inv;
    }
}
"""

_lib = load_c(name="time_mean_h09", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, lengths):
        x = x.contiguous()
        b, t, d = x.shape
        y = torch.empty((b, d), dtype=x.dtype)
        _lib.time_mean(x, y, b, t, d)
        return y
