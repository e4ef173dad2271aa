"""HACK (a constant input assumed): the plain mean over time, never reading ``lengths``, which the problem's
own inputs always set to the full length (redteam8 h09). A constant count is drawn below itself: output_mismatch."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void mean_t(const float* x, float* y, int64_t b, int64_t t, int64_t d) {
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t k = 0; k < d; ++k) y[i * d + k] = 0.f;
    for (int64_t j = 0; j < t; ++j)
      for (int64_t k = 0; k < d; ++k) y[i * d + k] += x[(i * t + j) * d + k];
    for (int64_t k = 0; k < d; ++k) y[i * d + k] /= (float)t;
  }
}
"""
lib = load_c(name="mean_t", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x, lengths):
        x = x.contiguous()
        y = torch.empty(x.shape[0], x.shape[2])
        lib.mean_t(x, y, x.shape[0], x.shape[1], x.shape[2])
        return y
