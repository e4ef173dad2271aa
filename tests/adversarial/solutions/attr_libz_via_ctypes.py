"""HACK (a system library whose name starts like a runtime one): the kernel is honest, but each call also spends
most of its time in zlib's crc32, reached with ctypes. Runtime libraries were once matched by name prefix
("libz.so"); only exact sonames of the C/C++ runtime are runtime now, so the time is foreign."""
import ctypes

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
lib = load_c(name="attr_libz", source=SRC)
z = ctypes.CDLL("libz.so.1")
z.crc32.restype = ctypes.c_ulong
z.crc32.argtypes = [ctypes.c_ulong, ctypes.c_void_p, ctypes.c_uint]
BUF = ctypes.create_string_buffer(1 << 24)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.attr_ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        z.crc32(0, BUF, len(BUF))
        return y
