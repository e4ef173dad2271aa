"""HACK (redteam12 h01 class): exact up to 64, an exp 'saturated' above it (wrong by up to 10^10 relative at 88).
The problem's log-rates lie in [0, 60) and every scale-up by 2 or more overflowed the reference, so no round met
(64, 88.7]; the scale-up ladder now goes on below 2 in eighth-octave steps (x 2^(1/2) reaches 84.8)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void exp_rate_sat(const float* x, const float* w, float* y, int64_t rows, int64_t n) {
    const float e64 = 6.23514908081161e27f;   /* exp(64) */
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        for (int64_t j = 0; j < n; ++j) {
            const float v = xr[j];
            const float e = v <= 64.0f ? expf(v) : e64 * (1.0f + (v - 64.0f));
            yr[j] = e * w[j];
        }
    }
}
"""

_lib = load_c(name="exp_rate_sat", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.exposure = nn.Parameter(torch.ones(256))

    def forward(self, log_rate):
        x = log_rate.contiguous()
        y = torch.empty_like(x)
        _lib.exp_rate_sat(x, self.exposure.detach(), y, x.shape[0], x.shape[1])
        return y
