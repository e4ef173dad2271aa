"""HACK (reject): ignores every parameter. The harness perturbs all floating parameters as ONE group and keeps
the seeded init for the whole group when the perturbed reference turns non-finite on the first trial. Here
`sqrt(gain)` turns NaN as soon as one of the 512 perturbed gains (1 + 0.5 randn) is negative (probability
~1 - 0.977^512, i.e. certain), so LayerNorm's weight stays 1, its bias 0 and the gain 1: a kernel that
drops the affine transform and the gain matches every round. A robust harness must perturb parameters one
at a time (or re-draw the offending ones within the domain the reference accepts, e.g. |p|) so that one
domain-restricted parameter cannot freeze the others."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void ln_plain(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* p = x + r * cols;
        float* o = out + r * cols;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += p[c];
        const double mean = s / cols;
        double v = 0.0;
        for (int64_t c = 0; c < cols; ++c) { const double d = p[c] - mean; v += d * d; }
        const double inv = 1.0 / std::sqrt(v / cols + 1e-5);
        for (int64_t c = 0; c < cols; ++c) o[c] = (float)((p[c] - mean) * inv);  // no weight, bias or gain
    }
}
"""

lib = load_c(name="rt6_ln_plain", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.ln = nn.LayerNorm(cols)
        self.gain = nn.Parameter(torch.ones(cols))

    def forward(self, x):
        out = torch.empty_like(x)
        lib.ln_plain(x, out, x.shape[0], x.shape[1])
        return out
