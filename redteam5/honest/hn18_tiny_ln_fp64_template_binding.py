"""p9: tiny fp64 LayerNorm as a torch binding: a width-templated kernel (D=64 unrolled at compile time, a
generic fallback), #pragma GCC optimize, __restrict__."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#pragma GCC optimize("O3,unroll-loops")
#include <cmath>

template <int D>
static void ln_fixed(const double* __restrict__ x, const double* __restrict__ w, const double* __restrict__ b,
                     double* __restrict__ o, int64_t rows, double eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * D;
        double m = 0.0;
        for (int j = 0; j < D; ++j) m += xr[j];
        m /= D;
        double v = 0.0;
        for (int j = 0; j < D; ++j) { const double t = xr[j] - m; v += t * t; }
        const double rs = 1.0 / std::sqrt(v / D + eps);
        for (int j = 0; j < D; ++j) o[r * D + j] = (xr[j] - m) * rs * w[j] + b[j];
    }
}

static void ln_any(const double* x, const double* w, const double* b, double* o, int64_t rows, int64_t d, double eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * d;
        double m = 0.0;
        for (int64_t j = 0; j < d; ++j) m += xr[j];
        m /= (double)d;
        double v = 0.0;
        for (int64_t j = 0; j < d; ++j) { const double t = xr[j] - m; v += t * t; }
        const double rs = 1.0 / std::sqrt(v / (double)d + eps);
        for (int64_t j = 0; j < d; ++j) o[r * d + j] = (xr[j] - m) * rs * w[j] + b[j];
    }
}

torch::Tensor ln(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.scalar_type() == at::kDouble, "fp64 only");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t d = x.size(-1), rows = x.numel() / d;
    if (d == 64)
        ln_fixed<64>(x.data_ptr<double>(), w.data_ptr<double>(), b.data_ptr<double>(), out.data_ptr<double>(), rows, eps);
    else
        ln_any(x.data_ptr<double>(), w.data_ptr<double>(), b.data_ptr<double>(), out.data_ptr<double>(), rows, d, eps);
    return out;
}
"""
ext = load_inline(name="hn18_ln", cpp_sources=CPP, functions=["ln"], extra_cflags=["-O3", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d, eps=1e-5, dtype=torch.float64)

    def forward(self, x):
        return ext.ln(x, self.ln.weight.detach().contiguous(), self.ln.bias.detach().contiguous(), self.ln.eps)
