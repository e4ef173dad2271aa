# HONEST: a tiled ("streaming") argmax whose running state is initialised in Python with torch.full(-inf) and
# torch.zeros, then updated by the C kernel over column tiles of 128; first index on ties, NaN is the maximum
# (the first NaN wins), as torch.argmax. The Python glue only allocates/fills (no compute). Problem: argmax_rows.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

// best/idx hold the running state for columns [0, c0); fold in columns [c0, c1)
extern "C" void argmax_tile(const float* x, float* best, int64_t* idx, int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = x + i * cols;
    float bv = best[i];
    int64_t bi = idx[i];
    if (std::isnan(bv)) continue;          // a NaN already won this row
    for (int64_t j = c0; j < c1; ++j) {
      const float v = r[j];
      if (std::isnan(v)) { bv = v; bi = j; break; }
      if (v > bv) { bv = v; bi = j; }
    }
    best[i] = bv;
    idx[i] = bi;
  }
}
"""

lib = load_c(name="rt2_hn15_argmax_tiles", source=SRC)
TILE = 128


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        best = torch.full((rows,), float("-inf"), dtype=torch.float32)
        idx = torch.zeros(rows, dtype=torch.int64)
        for c0 in range(0, cols, TILE):
            lib.argmax_tile(x, best, idx, rows, cols, c0, min(cols, c0 + TILE))
        return idx
