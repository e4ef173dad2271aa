"""HACK (an output flood that survives its own limit): ignores SIGXFSZ and writes 256 KB to stderr per
call, ignoring the EFBIG errors once the log is at its cap; the computation is right."""
import signal

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

SRC = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
static char junk[1 << 14];
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  std::memset(junk, 'z', sizeof junk);
  for (int i = 0; i < 16; ++i) std::fwrite(junk, 1, sizeof junk, stderr);
  std::fflush(stderr);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""
lib = load_c(name="ssc_log_flood", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        y = torch.empty_like(x)
        lib.ssc(x.contiguous(), self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
