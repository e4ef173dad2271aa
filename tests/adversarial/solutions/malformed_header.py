"""HACK (harness crash): a well-framed reply whose fields have the wrong types."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c
import os
import stat
import time

H = b'{"reply_to": "trial", "ok": true, "violations": [1, 2], "kernel_calls": "many"}'

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""
lib = load_c(name="ssc", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        for fd in range(3, 64):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, b'SKF1' + len(H).to_bytes(4, 'little') + (0).to_bytes(8, 'little') + H)
            except OSError:
                pass
        time.sleep(3600)
        return x
