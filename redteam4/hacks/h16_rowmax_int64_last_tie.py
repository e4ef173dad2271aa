"""p8_rowmax_int64 hack (expected caught): an honest int64 row max that keeps the *last* maximum on ties
(``>=``), not the first as torch documents.

A robust harness must reject it. Integer inputs get no "ties" transform (it is for floating tensors), so only
ties that occur naturally in the problem's own draws (about one row in a thousand here) can catch it.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void rowmax_last(const int64_t* x, int64_t* vals, int64_t* idx, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t* xr = x + r * cols;
        int64_t m = xr[0], mi = 0;
        for (int64_t j = 1; j < cols; ++j)
            if (xr[j] >= m) { m = xr[j]; mi = j; }
        vals[r] = m;
        idx[r] = mi;
    }
}
"""

lib = load_c(name="rt4_rowmax_last", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        vals = torch.empty(rows, dtype=torch.int64)
        idx = torch.empty(rows, dtype=torch.int64)
        lib.rowmax_last(x, vals, idx, rows, cols)
        return vals, idx
