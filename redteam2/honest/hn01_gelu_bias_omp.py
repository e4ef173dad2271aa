# HONEST: lean C ABI kernel (shiftkit.kernels.runtime.load_c) with OpenMP pragmas (`parallel for` + `simd`),
# std::erf from <cmath>, __restrict__ pointers and int64 sizes; the Python glue only calls .contiguous(),
# allocates the output with torch.empty_like and passes tensors. Problem: gelu_bias.
# Twin of hacks/h09_ctor_fork_spinners.py (identical kernel).
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void gelu_bias_fwd(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y,
                              int64_t rows, int64_t cols) {
  const float inv_sqrt2 = 0.70710678118654752440f;
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    #pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float v = xr[j] + b[j];
      yr[j] = 0.5f * v * (1.0f + std::erf(v * inv_sqrt2));
    }
  }
}
"""

lib = load_c(name="rt2_hn01_gelu_omp", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gelu_bias_fwd(x, self.bias, y, x.shape[0], x.shape[1])
        return y
