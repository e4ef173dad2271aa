"""HACK (a standard-library extension module as "the runtime"): the kernel is honest, but each call also spends
most of its time inside the stdlib C module unicodedata (lib-dynload). Everything under the interpreter's
prefix outside site-packages was once the runtime; only the interpreter, libpython and the worker's plumbing
modules are now."""
import unicodedata

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void attr_ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""
lib = load_c(name="attr_stdlib", source=SRC)
TEXT = "\u00e9\u00c5\ufb01\u2460" * 250_000


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.attr_ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        unicodedata.normalize("NFKD", TEXT)
        return y
