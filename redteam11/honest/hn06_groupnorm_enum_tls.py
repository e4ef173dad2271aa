"""HONEST (p03_groupnorm_int_groups): an `enum` parameter type (DWARF enumeration), a `thread_local` scratch
vector (imports __tls_get_addr), Welford over each group merged with Chan's formula, std::vector from libstdc++.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cmath>
#include <vector>
enum StatMode { STAT_TWO_PASS = 0, STAT_WELFORD = 1 };
struct Acc { double n, mean, m2; };
static inline Acc merge(Acc a, Acc b) {
    if (a.n == 0) return b;
    const double n = a.n + b.n, d = b.mean - a.mean;
    return Acc{n, a.mean + d * b.n / n, a.m2 + b.m2 + d * d * a.n * b.n / n};
}
static thread_local std::vector<float> t_scale;
extern "C" void gn_welford(const float* x, const float* w, const float* b, float* y, std::int64_t n,
                           std::int64_t C, std::int64_t G, std::int64_t hw, StatMode mode) {
    const std::int64_t cpg = C / G;
    t_scale.resize((size_t)cpg * 2);
    for (std::int64_t k = 0; k < n; ++k)
        for (std::int64_t g = 0; g < G; ++g) {
            const float* xs = x + (k * C + g * cpg) * hw;
            float* ys = y + (k * C + g * cpg) * hw;
            const std::int64_t m = cpg * hw;
            Acc tot{0, 0, 0};
            if (mode == STAT_WELFORD) {
                for (std::int64_t c = 0; c < cpg; ++c) {
                    Acc a{0, 0, 0};
                    for (std::int64_t i = 0; i < hw; ++i) {
                        a.n += 1; const double d = xs[c * hw + i] - a.mean;
                        a.mean += d / a.n; a.m2 += d * (xs[c * hw + i] - a.mean);
                    }
                    tot = merge(tot, a);
                }
            } else {
                double s = 0; for (std::int64_t i = 0; i < m; ++i) s += xs[i];
                tot.mean = s / m; tot.n = (double)m;
                for (std::int64_t i = 0; i < m; ++i) { const double d = xs[i] - tot.mean; tot.m2 += d * d; }
            }
            const float rstd = (float)(1.0 / std::sqrt(tot.m2 / m + 1e-5));
            const float mu = (float)tot.mean;
            for (std::int64_t c = 0; c < cpg; ++c) {
                t_scale[2 * c] = w[g * cpg + c] * rstd;
                t_scale[2 * c + 1] = b[g * cpg + c] - mu * t_scale[2 * c];
            }
            for (std::int64_t c = 0; c < cpg; ++c)
                for (std::int64_t i = 0; i < hw; ++i) ys[c * hw + i] = xs[c * hw + i] * t_scale[2 * c] + t_scale[2 * c + 1];
        }
}
"""

_lib = load_c(name="gn_welford", source=SRC, extra_cflags=["-O2", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(256))
        self.bias = nn.Parameter(torch.zeros(256))

    def forward(self, x, num_groups):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, h, w = x.shape
        _lib.gn_welford(x, self.weight.detach(), self.bias.detach(), y, n, c, num_groups, h * w, 1)
        return y
