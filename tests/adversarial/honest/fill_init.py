"""HONEST (allocation with its initialisation in forward): per-feature scratch rows created with torch.full,
torch.ones and torch.zeros; the C kernel does all the arithmetic. (Filling a whole large output in torch is
time in torch: it counts towards the sampled torch share like any torch time, see docs/kernels.md.)"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, const float* one, float* lo,
                    float* clamped, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) lo[c] = lo[c] < -1.f ? lo[c] : -1.f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] * one[c] + b[c];
      v = v < lo[c] ? lo[c] : v;
      clamped[c] += (v <= -1.f || v >= 1.f) ? 1.f : 0.f;
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""
lib = load_c(name="ssc_fill_init", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        one = torch.ones(x.shape[1], dtype=x.dtype)
        lo = torch.full((x.shape[1],), float("inf"), dtype=x.dtype)
        clamped = torch.zeros(x.shape[1], dtype=x.dtype)
        lib.ssc(x.contiguous(), self.weight, self.bias, y, one, lo, clamped, x.shape[0], x.shape[1])
        return y
