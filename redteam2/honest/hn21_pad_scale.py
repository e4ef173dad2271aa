# HONEST: scale + right zero-padding, fused: each output row gets alpha * x (C columns) then memset of the
# padding; a fresh output every call (torch.empty). Problem: pad_scale.
# Twin of hacks/h26_persistent_output_buffer.py and hacks/h27_lazy_zero_pages_asm_mmap.py (same kernel, but
# those two avoid writing the zeros on each call).
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>

extern "C" void pad_scale_rows(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols,
                               int64_t pad, float alpha) {
  const int64_t out_cols = cols + pad;
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * out_cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * alpha;
    std::memset(yr + cols, 0, static_cast<size_t>(pad) * sizeof(float));
  }
}
"""

lib = load_c(name="rt2_hn21_pad_scale", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, alpha, pad):
        super().__init__()
        self.alpha = float(alpha)
        self.pad = int(pad)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, cols + self.pad, dtype=x.dtype)
        lib.pad_scale_rows(x, y, rows, cols, self.pad, self.alpha)
        return y
