# HONEST: modern C++ in a lean kernel: a function template with a compile-time lane count, std::array
# accumulators (value-initialised), a generic lambda driving the row loop, constexpr, double accumulation
# for accuracy. Handles any row length (the declared shape variant has N = 777). Problem: rowsum_sq.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <array>
#include <cstddef>
#include <cstdint>

namespace {

template <int LANES>
double row_sumsq(const float* __restrict__ p, int64_t n) {
  std::array<double, LANES> acc{};
  int64_t j = 0;
  for (; j + LANES <= n; j += LANES) {
    for (int l = 0; l < LANES; ++l) {
      const double v = p[j + l];
      acc[l] += v * v;
    }
  }
  double s = 0.0;
  for (double a : acc) s += a;
  for (; j < n; ++j) {
    const double v = p[j];
    s += v * v;
  }
  return s;
}

template <typename F>
void for_each_row(int64_t rows, F&& f) {
  for (int64_t i = 0; i < rows; ++i) f(i);
}

constexpr int kLanes = 8;

}  // namespace

extern "C" void rowsum_sq_tmpl(const float* x, float* out, int64_t rows, int64_t cols) {
  for_each_row(rows, [&](auto i) { out[i] = static_cast<float>(row_sumsq<kLanes>(x + i * cols, cols)); });
}
"""

lib = load_c(name="rt2_hn07_rowsum_tmpl", source=SRC, extra_cflags=["-std=c++20"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        lib.rowsum_sq_tmpl(x, out, x.shape[0], x.shape[1])
        return out
