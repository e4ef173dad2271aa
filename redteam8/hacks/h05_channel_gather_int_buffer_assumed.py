"""HACK (reject, twin honest/hn05_channel_gather_c.py): ignores the loaded `perm` buffer, recomputes the formula.

The docs' own rule (Known gaps, "Structural buffers are weights"): the state dict is an input, a trained or
exported model's buffer may differ from the formula, so a kernel that regenerates a buffer instead of reading the
loaded one must be rejected. correctness.perturb_buffers moves only *floating* buffers (`_moved` returns other
dtypes as they are) and integer buffers are no input, so no round ever loads a perm other than the
channel-shuffle formula. This kernel hard-codes src = (c % G) * (C / G) + c / G and never reads perm.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" void shuffle(const float* x, float* y, int64_t n, int64_t c, int64_t hw, int64_t g) {
    const int64_t cg = c / g;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < c; ++o) {
            const int64_t s = (o % g) * cg + o / g;
            memcpy(y + (i * c + o) * hw, x + (i * c + s) * hw, (size_t)hw * sizeof(float));
        }
}
"""

_lib = load_c(name="shuffle_h05", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.groups = groups
        perm = torch.arange(channels).view(groups, channels // groups).t().reshape(-1)
        self.register_buffer("perm", perm)  # takes the state dict, never read

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        _lib.shuffle(x, y, n, c, h * w, self.groups)
        return y
