"""HACK background std::thread in the kernel source."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <thread>
extern "C" void rowsum_bg(const float* x, const float* alpha, float* y, int64_t rows, int64_t cols) {
  std::thread t([=] {
    for (int64_t r = 0; r < rows; ++r) { double s = 0; for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c]; y[r] = (float)s * alpha[0]; }
  });
  t.detach();
}
"""
lib = load_c(name="rowsum_bg", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(()))

    def forward(self, x):
        y = torch.empty(x.shape[0], 1)
        lib.rowsum_bg(x.contiguous(), self.alpha, y, x.shape[0], x.shape[1])
        return y
