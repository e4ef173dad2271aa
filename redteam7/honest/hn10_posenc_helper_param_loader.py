"""Honest (false-positive probe): a correct kernel that reads the loaded pe buffer, built through a small
helper that takes the source as a parameter (a common way to share build flags between kernels). Every
value is a static literal, but specs._function_bindings drops a function's parameters, so the load_c call's
`source=src` is unresolved. Expected here: dynamic_sources."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

FLAGS = ["-O3", "-march=native"]

SRC = r"""
#include <stdint.h>
extern "C" void posenc_add_buf(const float* x, const float* pe, float* out, int64_t B, int64_t T, int64_t D) {
    for (int64_t b = 0; b < B; ++b) {
        const float* xb = x + b * T * D;
        float* ob = out + b * T * D;
        for (int64_t i = 0; i < T * D; ++i) ob[i] = xb[i] + pe[i];
    }
}
"""


def _build(name, src):
    return load_c(name=name, source=src, extra_cflags=FLAGS)


_lib = _build("posenc_add_buf", SRC)


class ModelNew(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.register_buffer("pe", torch.zeros(max_len, d_model))  # the loaded state overwrites it

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        b, t, d = x.shape
        _lib.posenc_add_buf(x, self.pe, out, b, t, d)  # pe rows 0..t-1 are its first t*d floats
        return out
