"""HONEST (p2_ln_sqrt_gain): full LayerNorm + affine + sqrt(gain), two-pass in double. The epsilon is passed the
way many engineers pass constants: `-DEPS=1e-5`. Probe: a -D value containing '-' (an exponent), which the
flag allowlist's -D value class [A-Za-z0-9_.] does not cover."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
#ifndef EPS
#error "EPS must be defined"
#endif
extern "C" void ln_gain(const float* x, const float* w, const float* b, const float* g, float* out,
                        int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* p = x + r * cols;
        float* o = out + r * cols;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += p[c];
        const double mean = s / cols;
        double v = 0.0;
        for (int64_t c = 0; c < cols; ++c) { const double d = p[c] - mean; v += d * d; }
        const double inv = 1.0 / std::sqrt(v / cols + (double)EPS);
        for (int64_t c = 0; c < cols; ++c) {
            const float y = (float)((p[c] - mean) * inv) * w[c] + b[c];
            o[c] = y * std::sqrt(g[c]);
        }
    }
}
"""

lib = load_c(name="rt6_ln_eps_flag", source=SRC, extra_cflags=["-O3", "-DEPS=1e-5"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.ln = nn.LayerNorm(cols)
        self.gain = nn.Parameter(torch.ones(cols))

    def forward(self, x):
        out = torch.empty_like(x)
        lib.ln_gain(x, self.ln.weight, self.ln.bias, self.gain, out, x.shape[0], x.shape[1])
        return out
