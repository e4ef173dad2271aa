"""p2: a 256-entry table built once (in C, at first call) and a gather loop; twin of h04."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
static uint8_t T[256];
static int ready = 0;
extern "C" void u8_lut(const uint8_t* __restrict__ x, uint8_t* __restrict__ out, int64_t n) {
    if (!ready) {
        for (int v = 0; v < 256; ++v) T[v] = (uint8_t)((uint8_t)(v * 37 + 11) ^ (uint8_t)(v >> 3));
        ready = 1;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = T[x[i]];
}
"""
lib = load_c(name="hn04_u8", source=SRC, extra_cflags=["-O3", "-funroll-loops"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.u8_lut(x, out, x.numel())
        return out
