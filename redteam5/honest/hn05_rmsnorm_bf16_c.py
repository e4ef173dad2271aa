"""p3: RMSNorm on bf16 in a lean C kernel: bf16 bits widened by a shift, double sum of squares, round-to-nearest-even
back to bf16; the fp32 gain read from the (loaded) parameter every call."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cstring>
#include <cmath>

static inline float bf2f(std::uint16_t h) { std::uint32_t u = (std::uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f; }
static inline std::uint16_t f2bf(float f) {
    std::uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;           // NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                 // round to nearest even
    return (std::uint16_t)(u >> 16);
}

extern "C" void rmsnorm_bf16(const std::uint16_t* x, const float* w, std::uint16_t* out,
                             std::int64_t rows, std::int64_t d, float eps) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::uint16_t* xr = x + r * d;
        double ss = 0.0;
        for (std::int64_t j = 0; j < d; ++j) { double v = bf2f(xr[j]); ss += v * v; }
        float mean = (float)(ss / (double)d);
        float inv = 1.0f / std::sqrt(mean + eps);
        std::uint16_t* o = out + r * d;
        for (std::int64_t j = 0; j < d; ++j) o[j] = f2bf(bf2f(xr[j]) * inv * w[j]);
    }
}
"""
lib = load_c(name="hn05_rms", source=SRC, extra_cflags=["-O3", "-march=native"])
EPS = 1e-6


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        w = self.weight.detach().contiguous()
        lib.rmsnorm_bf16(x, w, out, x.shape[0], x.shape[1], EPS)
        return out
