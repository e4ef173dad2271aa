"""p2: the 256-entry table computed with torch in __init__ (input-independent load-time work, as the docs allow),
then a lean C gather in forward."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void gather_u8(const std::uint8_t* __restrict__ t, const std::uint8_t* __restrict__ x,
                          std::uint8_t* __restrict__ out, std::int64_t n) {
    std::uint8_t T[256];
    for (int i = 0; i < 256; ++i) T[i] = t[i];
    std::int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        out[i] = T[x[i]]; out[i + 1] = T[x[i + 1]]; out[i + 2] = T[x[i + 2]]; out[i + 3] = T[x[i + 3]];
    }
    for (; i < n; ++i) out[i] = T[x[i]];
}
"""
lib = load_c(name="hn23_u8", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        v = torch.arange(256, dtype=torch.uint8)
        self.table = ((v * 37 + 11) ^ (v >> 3)).contiguous()  # plain attribute: not part of the state dict

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gather_u8(self.table, x, out, x.numel())
        return out
