"""HONEST (p04_gelu_mode_arg): C++ templates, one instantiation per mode (a bool template parameter), float
math with std::tanh / std::erf, dispatched on the string in forward.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cmath>
namespace {
template <bool Tanh>
inline float gelu1(float v) {
    if constexpr (Tanh) {
        const float k0 = 0.7978845608028654f;
        return 0.5f * v * (1.0f + std::tanh(k0 * (v + 0.044715f * v * v * v)));
    } else {
        return 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
    }
}
template <bool Tanh>
void run(const float* x, float* y, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = gelu1<Tanh>(x[i]);
}
}  // namespace
extern "C" void gelu_tpl(const float* x, float* y, std::int64_t n, bool tanh_mode) {
    if (tanh_mode) run<true>(x, y, n); else run<false>(x, y, n);
}
"""

_lib = load_c(name="gelu_tpl", source=SRC, extra_cflags=["-O2", "-std=c++17"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, approximate: str):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_tpl(x, y, x.numel(), approximate == "tanh")
        return y
