# HONEST: GCC function multi-versioning on the exported entry point:
# extern "C" __attribute__((target_clones("avx2", "default"))) - the compiler emits an AVX2 and a baseline
# clone plus an IFUNC resolver that picks one at load time. Plain std::exp otherwise. Problem: exp_scale.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" __attribute__((target_clones("avx2", "default")))
void exp_scale_mv(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                  int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = std::exp(xr[j]) * w[j];
  }
}
"""

lib = load_c(name="rt2_hn06_exp_clones", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.exp_scale_mv(x, self.weight, y, x.shape[0], x.shape[1])
        return y
