# HONEST: an index (int64) output written through a typedef'd std::int64_t pointer; torch's semantics kept
# exactly: the first maximal index on ties, NaN counts as the maximum (the first NaN wins). Problem: argmax_rows.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

typedef std::int64_t index_t;

extern "C" void argmax_rows(const float* x, index_t* out, index_t rows, index_t cols) {
  for (index_t i = 0; i < rows; ++i) {
    const float* r = x + i * cols;
    index_t best = 0;
    float bv = r[0];
    if (!std::isnan(bv)) {
      for (index_t j = 1; j < cols; ++j) {
        const float v = r[j];
        if (std::isnan(v)) { best = j; break; }
        if (v > bv) { bv = v; best = j; }
      }
    }
    out[i] = best;
  }
}
"""

lib = load_c(name="rt2_hn14_argmax", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64)
        lib.argmax_rows(x, out, x.shape[0], x.shape[1])
        return out
