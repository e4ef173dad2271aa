"""Honest (false-positive probe): a two-pass kernel with a scratch vector of row maxima, kept on the module
with register_buffer (persistent by default, as most code leaves it). The reference's state dict has no
`row_max`, and the worker loads it strictly (worker.Server.load: self.model.load_state_dict(sd)):
"Missing key(s) in state_dict: row_max". Expected here: state_dict_mismatch, for a kernel KernelBench's own
harness (which never loads a state dict) would run."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void row_max_pass(const float* x, float* row_max, int64_t rows, int64_t cols, float tau) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -INFINITY;
        for (int64_t i = 0; i < cols; ++i) { const float y = xr[i] / tau; m = y > m ? y : m; }
        row_max[r] = m;
    }
}
extern "C" void lse_pass(const float* x, const float* row_max, float* out, int64_t rows, int64_t cols, float tau) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float m = row_max[r];
        if (isinf(m)) { out[r] = tau * m; continue; }
        double s = 0.0;
        for (int64_t i = 0; i < cols; ++i) s += exp((double)(xr[i] / tau) - (double)m);
        out[r] = tau * (float)((double)m + log(s));
    }
}
"""

_lib = load_c(name="smooth_max_two_pass", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("row_max", torch.empty(2048))  # scratch, grown on demand

    def forward(self, x, tau: float):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        if self.row_max.numel() < rows:
            self.row_max.resize_(rows)
        out = torch.empty(x.shape[:-1], dtype=x.dtype)
        _lib.row_max_pass(x, self.row_max, rows, cols, float(tau))
        _lib.lse_pass(x, self.row_max, out, rows, cols, float(tau))
        return out
