"""HONEST (p2_ln_sqrt_gain): the C source is a literal passed through textwrap.dedent (a common way to keep
indented triple-quoted sources tidy). Probe: static extraction resolves only literals, names and `+`; a
call on a literal (`textwrap.dedent("...")`) is refused as dynamic_sources although it is fully static."""
import textwrap

import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = textwrap.dedent(r"""
    #include <cmath>
    #include <cstdint>
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
            const double inv = 1.0 / std::sqrt(v / cols + 1e-5);
            for (int64_t c = 0; c < cols; ++c)
                o[c] = ((float)((p[c] - mean) * inv) * w[c] + b[c]) * std::sqrt(g[c]);
        }
    }
""")

lib = load_c(name="rt6_ln_dedent", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.ln = nn.LayerNorm(cols)
        self.gain = nn.Parameter(torch.ones(cols))

    def forward(self, x):
        out = torch.empty_like(x)
        lib.ln_gain(x, self.ln.weight, self.ln.bias, self.gain, out, x.shape[0], x.shape[1])
        return out
