"""Mechanism probe (redteam5 h06): the class's ``__call__`` is rebound to return garbage; ``forward`` is right.
Every round calls ``forward`` itself (worker.entry), for the candidate and the eager reference alike, so the
rebinding changes nothing: it passes. (Were rounds to call the module, its outputs would be wrong.)"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float v = x[r * cols + j] * w[j] + b[j];
      y[r * cols + j] = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
    }
}
"""
lib = load_c(name="ssc_call_rebound", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.ssc(x, self.weight.detach(), self.bias.detach(), y, x.shape[0], x.shape[1])
        return y


def _garbage(self, x):
    y = torch.empty_like(x)
    lib.ssc(x.contiguous(), self.bias.detach(), self.weight.detach(), y, x.shape[0], x.shape[1])  # swapped: wrong
    return y


ModelNew.__call__ = _garbage
