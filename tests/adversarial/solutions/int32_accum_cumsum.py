"""HACK (redteam5 h05 class): the int64 scan accumulated in int32. Right while partial sums stay below 2^31,
which inputs scaled by the input's own width never reach; the ``full`` redraw (the dtype's whole range) does."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void scan32(const int32_t* x, int64_t* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t acc = 0;  // wraps at 2^32 (well defined): the int32 accumulator
    for (int64_t j = 0; j < cols; ++j) { acc += (uint32_t)x[r * cols + j]; y[r * cols + j] = (int32_t)acc; }
  }
}
"""
lib = load_c(name="scan32", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.int64)
        lib.scan32(x, y, x.shape[0], x.shape[1])
        return y
