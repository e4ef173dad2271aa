"""HONEST (twin of mask_empty_row_sentinel): torch's rule: the first maximum, -inf where masked out, so a row
with nothing masked in gives index 0."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void margmax(const float* x, const bool* m, int64_t* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    float bv = m[r * cols] ? x[r * cols] : -INFINITY;
    for (int64_t j = 1; j < cols; ++j) {
      float v = m[r * cols + j] ? x[r * cols + j] : -INFINITY;
      if (v > bv) { bv = v; best = j; }
    }
    out[r] = best;
  }
}
"""
lib = load_c(name="margmax_torch_rule", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x, m):
        x, m = x.contiguous(), m.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64)
        lib.margmax(x, m, out, x.shape[0], x.shape[1])
        return out
