"""HONEST (twin of zero_page_output): the kernel copies the rows and writes the zero padding itself, into
an output torch allocates."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>
extern "C" void pad_rows(const float* x, float* y, int64_t n, int64_t pad) {
  std::memcpy(y, x, n * sizeof(float));
  std::memset(y + n, 0, pad * sizeof(float));
}
"""
lib = load_c(name="pad_rows_c", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty(4 * rows, cols, dtype=x.dtype)
        lib.pad_rows(x.contiguous(), y, x.numel(), 3 * rows * cols)
        return y
