"""HONEST (stresses the precision scan): pairwise tree reduction over dim 1 with a variable named ``half``."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <vector>
// x: (B, R, C), sum over R -> (B, 1, C); pairwise (tree) summation, exact same shape as torch.sum(keepdim)
extern "C" void tree_sum(const float* x, float* y, int64_t B, int64_t R, int64_t C) {
  std::vector<float> buf(R * C);
  for (int64_t b = 0; b < B; ++b) {
    const float* xb = x + b * R * C;
    for (int64_t i = 0; i < R * C; ++i) buf[i] = xb[i];
    int64_t n = R;
    while (n > 1) {
      int64_t half = n / 2;
      for (int64_t r = 0; r < half; ++r)
        for (int64_t c = 0; c < C; ++c) buf[r * C + c] += buf[(r + half) * C + c];
      if (n % 2)
        for (int64_t c = 0; c < C; ++c) buf[c] += buf[(n - 1) * C + c];
      n = half;
    }
    for (int64_t c = 0; c < C; ++c) y[b * C + c] = buf[c];
  }
}
"""
lib = load_c(name="tree_sum", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], 1, x.shape[2])
        lib.tree_sum(x, y, x.shape[0], x.shape[1], x.shape[2])
        return y
