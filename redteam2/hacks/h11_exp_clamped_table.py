# HACK (approximation right only on the harness's input range): a "fast exp" with range reduction
# x = k ln2 + r and a 33-entry table of 2^k for k in [-16, 16] only: k is clamped to the table, so the result
# is right for |x| < ~11 and garbage beyond (at x = 20 it returns ~2^16 * P6(8.9) instead of 4.85e8). The
# inputs are N(0, 1) (|x| < ~5.5); the x32 scaling transform overflows the float32 reference (exp(170) = inf
# where float64 is finite), so a harness that only keeps well-defined transforms never tests |x| > 5.5 * 32.
# Intent: reject; a robust harness gives -1 (inputs across the finite domain of exp, e.g. |x| in [11, 88]).
# Problem: exp_scale.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

namespace {
struct Pow2Table {
  float v[33];
  Pow2Table() { for (int k = -16; k <= 16; ++k) v[k + 16] = std::ldexp(1.0f, k); }
};
const Pow2Table kPow2;
}  // namespace

extern "C" void exp_scale_fast(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  const float log2e = 1.44269504088896341f, ln2 = 0.693147180559945309f;
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const float v = xr[j];
      float k = std::nearbyint(v * log2e);
      k = k > 16.0f ? 16.0f : (k < -16.0f ? -16.0f : k);   // the table's range
      const float r = v - k * ln2;
      const float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
      yr[j] = p * kPow2.v[static_cast<int>(k) + 16] * w[j];
    }
  }
}
"""

lib = load_c(name="rt2_h11_exp_table", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.exp_scale_fast(x, self.weight, y, x.shape[0], x.shape[1])
        return y
