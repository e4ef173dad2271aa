"""HONEST (false-positive classes of the C scan): helper functions named read and write,
``#pragma GCC optimize("O3,unroll-loops")`` and ``#pragma STDC FP_CONTRACT OFF`` (stricter floating point)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#pragma GCC optimize("O3,unroll-loops")
#pragma STDC FP_CONTRACT OFF
#include <cstdint>
static inline float read(const float* p, std::int64_t i) { return p[i]; }
static inline void write(float* p, std::int64_t i, float v) { p[i] = v; }
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = read(x, r * cols + c) * read(w, c) + read(b, c);
      write(y, r * cols + c, v < -1.f ? -1.f : (v > 1.f ? 1.f : v));
    }
}
"""
lib = load_c(name="ssc_scan", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
