# HONEST: a TORCH_LIBRARY / TORCH_LIBRARY_IMPL custom operator (no pybind), called as torch.ops.<ns>.<op>;
# bf16 handled by bit manipulation (bf16->f32 is a shift; f32->bf16 round-to-nearest-even with NaN kept quiet),
# at::parallel_for, at::empty_like. Problem: p8_softplus_bf16.
# Torch semantics (beta 1, threshold 20): x if x > 20 else log1p(exp(x)), computed in float (torch's opmath).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/Parallel.h>
#include <cmath>
#include <cstdint>
#include <cstring>

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

at::Tensor softplus_bf16(const at::Tensor& x) {
    TORCH_CHECK(x.scalar_type() == at::kBFloat16, "softplus_bf16: bfloat16 input expected");
    at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty_like(xc);
    const uint16_t* xp = static_cast<const uint16_t*>(xc.data_ptr());
    uint16_t* yp = static_cast<uint16_t*>(y.data_ptr());
    at::parallel_for(0, xc.numel(), 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const float v = bf16_to_f32(xp[i]);
            const float r = v > 20.0f ? v : std::log1p(std::exp(v));
            yp[i] = f32_to_bf16(r);
        }
    });
    return y;
}

TORCH_LIBRARY(rt3_hn16, m) {
    m.def("softplus_bf16(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(rt3_hn16, CPU, m) {
    m.impl("softplus_bf16", &softplus_bf16);
}
"""

load_inline(name="hn16_softplus_lib", cpp_sources=CPP, is_python_module=False, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.ops.rt3_hn16.softplus_bf16(x)
