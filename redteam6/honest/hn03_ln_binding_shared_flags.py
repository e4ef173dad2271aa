"""HONEST (p2_ln_sqrt_gain): a load_inline binding; the same FLAGS list is passed as extra_cflags and
extra_ldflags (a common habit: `-march=native` at link time is harmless). Probe: the link-flag allowlist
(-fopenmp|-pthread|-lpthread|-lm|-lgomp|-O[0-3]) does not accept -march=native."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor ln_gain(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor g) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
    const float* p0 = xc.data_ptr<float>();
    const float* pw = w.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    const float* pg = g.data_ptr<float>();
    float* o0 = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* p = p0 + r * cols;
        float* o = o0 + r * cols;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += p[c];
        const double mean = s / cols;
        double v = 0.0;
        for (int64_t c = 0; c < cols; ++c) { const double d = p[c] - mean; v += d * d; }
        const double inv = 1.0 / std::sqrt(v / cols + 1e-5);
        for (int64_t c = 0; c < cols; ++c)
            o[c] = ((float)((p[c] - mean) * inv) * pw[c] + pb[c]) * std::sqrt(pg[c]);
    }
    return out;
}
"""

FLAGS = ["-O3", "-march=native"]
ext = load_inline(name="rt6_ln_binding", cpp_sources=CPP, functions=["ln_gain"],
                  extra_cflags=FLAGS, extra_ldflags=FLAGS)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.ln = nn.LayerNorm(cols)
        self.gain = nn.Parameter(torch.ones(cols))

    def forward(self, x):
        return ext.ln_gain(x, self.ln.weight.detach(), self.ln.bias.detach(), self.gain.detach())
