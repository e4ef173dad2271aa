"""HONEST (a persistent output buffer, fully written every call): the kernel writes both triangles, zeros
included, into the same buffer each round; the parent's pattern between rounds changes nothing for it."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void triu_full(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = j >= i ? x[i * n + j] : 0.0f;
}
"""
lib = load_c(name="triu_full", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = None

    def forward(self, x):
        x = x.contiguous()
        if self.buf is None or self.buf.shape != x.shape:
            self.buf = torch.empty_like(x)
        lib.triu_full(x, self.buf, x.shape[0])
        return self.buf
