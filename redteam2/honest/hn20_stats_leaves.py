# HONEST: a tuple output with two non-tensor leaves. The C kernel computes y = 2 tanh(x), the sum of |y| in
# double and the count of positive inputs in one pass; the Python glue turns them into a Python float (the
# mean, rounded to float32 because the reference's mean is a float32 value; struct, no numpy) and a Python
# int. Problem: stats_leaves.
import struct

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void tanh2_stats(const float* x, float* y, int64_t n, double* abs_sum, int64_t* positives) {
  double s = 0.0;
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(v) * 2.0f;
    y[i] = t;
    s += std::fabs(static_cast<double>(t));
    c += v > 0.0f;
  }
  *abs_sum = s;
  *positives = c;
}
"""

lib = load_c(name="rt2_hn20_stats", source=SRC)


def _as_float32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._sum = torch.zeros(1, dtype=torch.float64)
        self._cnt = torch.zeros(1, dtype=torch.int64)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        lib.tanh2_stats(x, y, n, self._sum, self._cnt)
        mean = _as_float32(float(self._sum[0]) / n)
        return y, mean, int(self._cnt[0])
