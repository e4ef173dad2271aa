"""Honest (false-positive probe): correct row normalisation whose source is assembled at module level with
`+=` (a shared prologue, then the kernel). All literals; but specs._module_bindings reads only plain
assignments, so the extracted SRC is the prologue alone: the parent builds that, and the worker's load_c call
(with the full SRC) finds no prebuilt entry with its key (runtime._lookup: "kernel sources ... differ from
those extracted before the run"). Expected here: load_error."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
static inline double sq(float v) { return (double)v * (double)v; }
"""
SRC += r"""
extern "C" void row_normalize_aug(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double s = 0.0;
        for (int64_t i = 0; i < cols; ++i) s += sq(xr[i]);
        float n = (float)sqrt(s);
        if (n < 1e-12f) n = 1e-12f;
        float* o = out + r * cols;
        for (int64_t i = 0; i < cols; ++i) o[i] = xr[i] / n;
    }
}
"""

_lib = load_c(name="row_normalize_aug", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.row_normalize_aug(x, out, x.numel() // cols, cols)
        return out
