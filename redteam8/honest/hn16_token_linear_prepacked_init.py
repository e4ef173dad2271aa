"""Honest FP probe: keeps nn.Linear (names match), but packs W^T once in __init__ (a plain attribute) so the inner
loop streams contiguous output columns; a common "prepack the weights once" optimisation.

Predicted rejection: the harness constructs ModelNew, THEN loads the (secret, perturbed) reference weights into it
(worker.Server.load); `proj.weight` changes in place but the packed copy keeps the construction-time values:
output_mismatch on trial 0. KernelBench's own flow (same seed, no load) would accept it."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void linear_packed(const float* x, const float* wt, const float* b, float* y,
                              int64_t t, int64_t in, int64_t out) {
    for (int64_t r = 0; r < t; ++r) {
        float* yr = y + r * out;
        for (int64_t j = 0; j < out; ++j) yr[j] = b[j];
        for (int64_t k = 0; k < in; ++k) {
            const float xv = x[r * in + k];
            const float* wk = wt + k * out;
            for (int64_t j = 0; j < out; ++j) yr[j] += xv * wk[j];
        }
    }
}
"""

_lib = load_c(name="linear_packed", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)
        self.w_t = self.proj.weight.detach().t().contiguous()  # (in, out), packed once

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty((x.shape[0], self.proj.out_features), dtype=x.dtype)
        _lib.linear_packed(x, self.w_t, self.proj.bias, y, x.shape[0], x.shape[1], self.proj.out_features)
        return y
