"""HACK (redteam5 h09 class): -1 for a row with no masked-in entry (torch gives 0). A density redraw of a
half-full mask never draws such a row; the ``empty`` redraw (whole rows False) does."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void margmax(const float* x, const bool* m, int64_t* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = -1;
    for (int64_t j = 0; j < cols; ++j)
      if (m[r * cols + j] && (best < 0 || x[r * cols + j] > x[r * cols + best])) best = j;
    out[r] = best;
  }
}
"""
lib = load_c(name="margmax_sentinel", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x, m):
        x, m = x.contiguous(), m.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64)
        lib.margmax(x, m, out, x.shape[0], x.shape[1])
        return out
