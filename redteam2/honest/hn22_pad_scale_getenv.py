# HONEST: the same fused pad+scale, with an optional tuning knob read once from the environment in C
# (std::getenv("RT2_PAD_ROW_BLOCK"), default 16 rows per block; a common way to expose a block size) and
# row blocking. Problem: pad_scale.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {
int64_t row_block() {
  static int64_t rb = [] {
    const char* s = std::getenv("RT2_PAD_ROW_BLOCK");
    long v = s ? std::strtol(s, nullptr, 10) : 16;
    return static_cast<int64_t>(v > 0 && v < 4096 ? v : 16);
  }();
  return rb;
}
}  // namespace

extern "C" void pad_scale_blocked(const float* x, float* y, int64_t rows, int64_t cols, int64_t pad, float alpha) {
  const int64_t out_cols = cols + pad;
  const int64_t rb = row_block();
  for (int64_t i0 = 0; i0 < rows; i0 += rb) {
    const int64_t i1 = i0 + rb < rows ? i0 + rb : rows;
    for (int64_t i = i0; i < i1; ++i) {
      const float* xr = x + i * cols;
      float* yr = y + i * out_cols;
      for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * alpha;
      std::memset(yr + cols, 0, static_cast<size_t>(pad) * sizeof(float));
    }
  }
}
"""

lib = load_c(name="rt2_hn22_pad_getenv", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, alpha, pad):
        super().__init__()
        self.alpha = float(alpha)
        self.pad = int(pad)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, cols + self.pad, dtype=x.dtype)
        lib.pad_scale_blocked(x, y, rows, cols, self.pad, self.alpha)
        return y
