# HONEST: C++ with std::vector scratch (the transposed weight and a row accumulator), input validation that
# throws std::invalid_argument inside the kernel and is caught there (the status goes back through an int32
# out-parameter; no exception ever crosses the C ABI), std::tanh. Odd, small shapes (1023 x 17 -> 31, and the
# declared variants M = 1 and M = 4097) where per-call overhead dominates. Problem: odd_linear.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace {
struct Dims { int64_t m, k, n; };

void validate(const Dims& d) {
  if (d.m < 0 || d.k <= 0 || d.n <= 0) throw std::invalid_argument("odd_linear: non-positive dimension");
}
}  // namespace

extern "C" void odd_linear_fwd(const float* x, const float* w, const float* b, float* y,
                               int64_t m, int64_t k, int64_t n, int32_t* status) {
  try {
    const Dims d{m, k, n};
    validate(d);
    std::vector<float> wt(static_cast<size_t>(k * n));  // W is (n, k); keep W^T (k, n) for unit-stride rows
    for (int64_t o = 0; o < n; ++o)
      for (int64_t i = 0; i < k; ++i) wt[static_cast<size_t>(i * n + o)] = w[o * k + i];
    std::vector<float> acc(static_cast<size_t>(n));
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t o = 0; o < n; ++o) acc[static_cast<size_t>(o)] = b[o];
      const float* xr = x + r * k;
      for (int64_t i = 0; i < k; ++i) {
        const float xv = xr[i];
        const float* wr = wt.data() + i * n;
        for (int64_t o = 0; o < n; ++o) acc[static_cast<size_t>(o)] += xv * wr[o];
      }
      float* yr = y + r * n;
      for (int64_t o = 0; o < n; ++o) yr[o] = std::tanh(acc[static_cast<size_t>(o)]);
    }
    *status = 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "odd_linear_fwd failed: %s\n", e.what());
    *status = 1;
  }
}
"""

lib = load_c(name="rt2_hn10_odd_vector", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)
        self._status = torch.zeros(1, dtype=torch.int32)

    def forward(self, x):
        x = x.contiguous()
        m, k = x.shape
        n = self.fc.weight.shape[0]
        y = torch.empty(m, n, dtype=x.dtype)
        lib.odd_linear_fwd(x, self.fc.weight, self.fc.bias, y, m, k, n, self._status)
        if int(self._status[0]) != 0:
            raise RuntimeError("odd_linear kernel rejected its arguments")
        return y
