"""HONEST (parameters under its own names): the reference's ``gain`` and ``bias`` as ``g`` and ``b``, created
in the same order with the same shapes (redteam8 hn15); the weights are loaded position by position."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void tanh_affine(const float* x, const float* g, const float* b, float* y, int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) y[r * f + j] = std::tanh(x[r * f + j]) * g[j] + b[j];
}
"""
lib = load_c(name="tanh_affine", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.g = nn.Parameter(torch.ones(features))
        self.b = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.tanh_affine(x, self.g.detach().contiguous(), self.b.detach().contiguous(), y, x.shape[0], x.shape[1])
        return y
