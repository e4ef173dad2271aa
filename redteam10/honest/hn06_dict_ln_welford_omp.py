"""HONEST (p03_dict_batch_layernorm): Welford's running mean/M2 per row (8 interleaved lanes merged with Chan's
formula), `#pragma omp parallel for` over rows (-fopenmp on the compile and the link line), a small struct
helper, and rstd multiplication instead of the reference's division (~1 ulp apart).
Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>

struct Welford { double n; double mean; double m2; };

static inline void welford_push(Welford& w, double v) {
    w.n += 1.0;
    const double delta = v - w.mean;
    w.mean += delta / w.n;
    w.m2 += delta * (v - w.mean);
}

static inline Welford welford_merge(const Welford& a, const Welford& b) {
    if (a.n == 0.0) return b;
    if (b.n == 0.0) return a;
    Welford o;
    o.n = a.n + b.n;
    const double delta = b.mean - a.mean;
    o.mean = a.mean + delta * (b.n / o.n);
    o.m2 = a.m2 + b.m2 + delta * delta * (a.n * b.n / o.n);
    return o;
}

extern "C" void ln_welford(const float* x, const float* w, const float* b, float* y,
                           int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        Welford lanes[8] = {};
        for (int64_t j = 0; j < d; ++j) welford_push(lanes[j & 7], (double)xr[j]);
        Welford acc = lanes[0];
        for (int k = 1; k < 8; ++k) acc = welford_merge(acc, lanes[k]);
        const float mean = (float)acc.mean;
        const float rstd = (float)(1.0 / sqrt(acc.m2 / (double)d + (double)eps));
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
}
"""

_lib = load_c(name="ln_welford", source=SRC, extra_cflags=["-O3", "-march=native", "-fopenmp"],
              extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = float(eps)

    def forward(self, batch):
        x = batch["x"].contiguous()
        y = torch.empty_like(x)
        d = x.shape[-1]
        _lib.ln_welford(x, self.weight, self.bias, y, x.numel() // d, d, self.eps)
        return y
