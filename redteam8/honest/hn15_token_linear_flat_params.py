"""Honest FP probe: the Linear's parameters held flat as `self.weight` / `self.bias` (initialised exactly as
nn.Linear does, so KernelBench's seed-replay check sees identical weights), C matmul.

Predicted rejection: the harness hands weights over by name (worker.Server.load: load_state_dict(strict=False),
unexpected keys refused); the reference's `proj.weight` / `proj.bias` have no place here: state_dict_mismatch."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void linear_rows(const float* x, const float* w, const float* b, float* y,
                            int64_t t, int64_t in, int64_t out) {
    for (int64_t r = 0; r < t; ++r)
        for (int64_t j = 0; j < out; ++j) {
            float s = 0.f;
            for (int64_t k = 0; k < in; ++k) s += x[r * in + k] * w[j * in + k];
            y[r * out + j] = s + b[j];
        }
}
"""

_lib = load_c(name="linear_rows_flat", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        ref = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(ref.weight.detach().clone())
        self.bias = nn.Parameter(ref.bias.detach().clone())

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty((x.shape[0], self.weight.shape[0]), dtype=x.dtype)
        _lib.linear_rows(x, self.weight, self.bias, y, x.shape[0], x.shape[1], self.weight.shape[0])
        return y
