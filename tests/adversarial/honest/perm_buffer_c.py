"""HONEST (reads its loaded integer buffer): channels gathered by the permutation the parent loaded."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void gather_perm(const float* x, const int64_t* p, float* y, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = x[r * c + p[j]];
}
"""
lib = load_c(name="gather_perm", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.register_buffer("perm", torch.arange(channels).roll(1).flip(0))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gather_perm(x, self.perm.contiguous(), y, x.shape[0], x.shape[1])
        return y
