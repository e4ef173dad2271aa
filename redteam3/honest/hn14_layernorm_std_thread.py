# HONEST: C++ std::thread worker split (rows divided between the calling thread and one std::thread), built
# with the conventional "-pthread" compile and link flag. Two-pass mean/variance in double, affine weight and
# bias applied. Problem: p7_layernorm.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

static void ln_rows(const float* x, const float* w, const float* b, float* y,
                    int64_t r0, int64_t r1, int64_t D, double eps) {
    for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x + r * D;
        float* yr = y + r * D;
        double mean = 0.0;
        for (int64_t i = 0; i < D; ++i) mean += xr[i];
        mean /= (double)D;
        double var = 0.0;
        for (int64_t i = 0; i < D; ++i) { const double d = xr[i] - mean; var += d * d; }
        var /= (double)D;
        const double rstd = 1.0 / std::sqrt(var + eps);
        for (int64_t i = 0; i < D; ++i) yr[i] = (float)(((double)xr[i] - mean) * rstd * w[i] + b[i]);
    }
}

extern "C" void layernorm_mt(const float* x, const float* w, const float* b, float* y,
                             int64_t rows, int64_t D, double eps, int64_t nthreads) {
    nthreads = std::max<int64_t>(1, std::min<int64_t>(nthreads, rows));
    const int64_t chunk = (rows + nthreads - 1) / nthreads;
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < nthreads; ++t) {
        const int64_t r0 = t * chunk, r1 = std::min(rows, r0 + chunk);
        if (r0 < r1) pool.emplace_back(ln_rows, x, w, b, y, r0, r1, D, eps);
    }
    ln_rows(x, w, b, y, 0, std::min(rows, chunk), D, eps);
    for (auto& th : pool) th.join();
}
"""

lib = load_c(name="hn14_ln_threads", source=SRC, extra_cflags=["-O3", "-pthread"], extra_ldflags=["-pthread"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows = x.numel() // x.shape[-1]
        lib.layernorm_mt(x, self.ln.weight.detach(), self.ln.bias.detach(), y, rows, x.shape[-1], float(self.ln.eps), 2)
        return y
