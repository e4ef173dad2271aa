"""HACK (an integer buffer assumed): gathers channels by the formula the reference's __init__ used for its
permutation buffer, never reading the loaded one (redteam8 h05). Integer buffers are redrawn like integer
inputs (a permutation permuted): output_mismatch."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void gather_formula(const float* x, float* y, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = x[r * c + (c - 1 - j + c - 1) % c];
}
"""
lib = load_c(name="gather_formula", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.register_buffer("perm", torch.arange(channels).roll(1).flip(0))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gather_formula(x, y, x.shape[0], x.shape[1])
        return y
