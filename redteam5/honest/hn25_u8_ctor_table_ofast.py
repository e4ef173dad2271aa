"""p2: the table built by a C constructor when the library loads (__attribute__((constructor))), an -Ofast build
with -funroll-all-loops, and a word-at-a-time loop (8 lookups per 64-bit load/store)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>
static std::uint8_t T[256];
__attribute__((constructor)) static void build_table() {
    for (int v = 0; v < 256; ++v) T[v] = (std::uint8_t)((std::uint8_t)(v * 37 + 11) ^ (std::uint8_t)(v >> 3));
}
extern "C" void u8_mix_words(const std::uint8_t* x, std::uint8_t* out, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w, o = 0;
        std::memcpy(&w, x + i, 8);
        for (int k = 0; k < 8; ++k) o |= (std::uint64_t)T[(w >> (8 * k)) & 0xFF] << (8 * k);
        std::memcpy(out + i, &o, 8);
    }
    for (; i < n; ++i) out[i] = T[x[i]];
}
"""
lib = load_c(name="hn25_u8", source=SRC, extra_cflags=["-Ofast", "-funroll-all-loops", "-fno-plt"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.u8_mix_words(x, out, x.numel())
        return out
