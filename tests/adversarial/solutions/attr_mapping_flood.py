"""HACK (the parent's attribution as the bottleneck): at import, ~6,000 separate executable VMAs (every other
page of one reservation made executable). A per-sample scan of the maps would keep the parent busy for
minutes per round; the parent reads at most a fixed number of executable mappings and reports the rest."""
import ctypes
import mmap

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
lib = load_c(name="attr_flood", source=SRC)
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
N, P = 6000, mmap.PAGESIZE
BASE = libc.mmap(None, 2 * N * P, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
for i in range(N):
    libc.mprotect(BASE + 2 * i * P, P, mmap.PROT_READ | mmap.PROT_EXEC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.attr_ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
