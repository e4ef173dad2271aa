# HONEST: a fast polynomial approximation that is accurate everywhere, not just on the test inputs:
# erfc(z) = t * P5(t) * exp(-z^2), t = 1 / (1 + p z) (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7 for
# all z >= 0), used as 1 + erf(v / sqrt 2) = erfc(-v / sqrt 2) on the negative side so nothing cancels.
# The GELU error is <= 0.75e-7 |v|, far inside the fp32 budget at any input scale. Problem: gelu_bias.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

namespace {
// erfc(z) for z >= 0 (A&S 7.1.26); absolute error <= 1.5e-7
inline float erfc_pos(float z) {
  const float p = 0.3275911f;
  const float a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f, a4 = -1.453152027f, a5 = 1.061405429f;
  const float t = 1.0f / (1.0f + p * z);
  const float poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
  return poly * std::exp(-z * z);
}

inline float gelu(float v) {
  const float z = std::fabs(v) * 0.70710678118654752440f;
  const float q = erfc_pos(z);               // = 1 - erf(|v| / sqrt 2)
  return v >= 0.0f ? 0.5f * v * (2.0f - q)   // 1 + erf(z)  = 2 - erfc(z)
                   : 0.5f * v * q;           // 1 + erf(-z) = erfc(z)
}
}  // namespace

extern "C" void gelu_bias_poly(const float* x, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = gelu(xr[j] + b[j]);
  }
}
"""

lib = load_c(name="rt2_hn02_gelu_poly", source=SRC, extra_cflags=["-O3", "-fno-math-errno"])


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gelu_bias_poly(x, self.bias, y, x.shape[0], x.shape[1])
        return y
