"""HONEST (p5_view_count): the first output is the same view eager returns (x[:rows//2], a view of the
parent's input region: zero work, exempt from the written-page check), the second a Python int returned by
a lean C function (int64 return read from DWARF). Probes: an output aliasing the input region, an int leaf."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" int64_t count_above(const float* x, int64_t n, float t) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) c += std::fabs(x[i]) > t;
    return c;
}
"""

lib = load_c(name="rt6_count", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return x[: x.shape[0] // 2], int(lib.count_above(x, x.numel(), 1.0))
