"""HACK precision downgrade: accumulate in _Float16."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void rowsum_half(const float* x, const float* alpha, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    _Float16 s = 0;
    for (int64_t c = 0; c < cols; ++c) s += (_Float16)x[r * cols + c];
    y[r] = (float)s * alpha[0];
  }
}
"""
lib = load_c(name="rowsum_half", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(()))

    def forward(self, x):
        y = torch.empty(x.shape[0], 1)
        lib.rowsum_half(x.contiguous(), self.alpha, y, x.shape[0], x.shape[1])
        return y
