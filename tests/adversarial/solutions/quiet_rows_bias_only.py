"""Hack (redteam8 h04): skip the product for "quiet" tokens and write the bias. A whole row whose inputs are below
2^-26 of the tensor's largest is wrong by ~100% of itself, but that is far below 1e-4 x the rms of an output whose
rows span many decades, so a tensor-wide budget passed it. Each element's budget is now its own
(correctness.element_scales): output_mismatch."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void linear_rows(const float* x, const float* w, const float* b, float* y,
                            int64_t t, int64_t in, int64_t out) {
    float gmax = 0.f;
    for (int64_t i = 0; i < t * in; ++i) gmax = fmaxf(gmax, fabsf(x[i]));
    const float thr = ldexpf(gmax, -26);
    for (int64_t r = 0; r < t; ++r) {
        const float* xr = x + r * in;
        float rmax = 0.f;
        for (int64_t k = 0; k < in; ++k) rmax = fmaxf(rmax, fabsf(xr[k]));
        float* yr = y + r * out;
        if (rmax < thr) {  // "silent" token: bias only
            for (int64_t j = 0; j < out; ++j) yr[j] = b[j];
            continue;
        }
        for (int64_t j = 0; j < out; ++j) {
            const float* wj = w + j * in;
            float s = 0.f;
            for (int64_t k = 0; k < in; ++k) s += xr[k] * wj[k];
            yr[j] = s + b[j];
        }
    }
}
"""

_lib = load_c(name="quiet_rows", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty((x.shape[0], self.proj.out_features), dtype=x.dtype)
        _lib.linear_rows(x, self.proj.weight, self.proj.bias, y, x.shape[0], x.shape[1], self.proj.out_features)
        return y
