"""Honest FP probe: hn05's kernel with its flags written as one string, `extra_cflags=["-O3 -march=native"]`
(torch's load_inline accepts this: ninja joins the list with spaces).

Predicted rejection: static.disallowed_flags matches each list element whole against the allowlist; "-O3
-march=native" matches nothing: build_flag."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" void gather_channels(const float* x, const int64_t* perm, float* y, int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < c; ++o)
            memcpy(y + (i * c + o) * hw, x + (i * c + perm[o]) * hw, (size_t)hw * sizeof(float));
}
"""

_lib = load_c(name="gather_channels_1s", source=SRC, extra_cflags=["-O3 -march=native"])


class ModelNew(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        perm = torch.arange(channels).view(groups, channels // groups).t().reshape(-1)
        self.register_buffer("perm", perm)

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        _lib.gather_channels(x, self.perm, y, n, c, h * w)
        return y
