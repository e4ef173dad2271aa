"""HONEST (redteam7 hn08/hn18 class): the reference returns an expand() view, and so does this kernel: it
computes the (B, C) gate and returns the same stride-0 view. A layout the reference itself returns is one a
candidate may return; before, the harness refused it for every party, the eager baseline included."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void gate(const float* x, float* g, int64_t bc, int64_t hw) {
  for (int64_t i = 0; i < bc; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < hw; ++j) s += x[i * hw + j];
    g[i] = 1.0f / (1.0f + std::exp(-(float)(s / (double)hw)));
  }
}
"""
lib = load_c(name="gate_expand", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        b, c, h, w = x.shape
        g = torch.empty(b, c, dtype=x.dtype)
        lib.gate(x, g, b * c, h * w)
        return g[:, :, None, None].expand_as(x)
