# HONEST: the output is initialised in Python with torch.zeros (allocation + initialisation, which the docs
# and the worker's op blocker treat as "no compute"), then a lean C kernel writes the one value per row.
# Problem: p9_scatter_rows. Out-of-range indices raise (as torch's scatter_ does) via a status word.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>

extern "C" void scatter_rows(const int64_t* idx, const float* vals, float* out, int64_t rows, int64_t cols,
                             int64_t* status) {
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t c = idx[r];
        if (c < 0 || c >= cols) { bad = 1; continue; }
        out[r * cols + c] = vals[r];
    }
    *status = bad;
}
"""

lib = load_c(name="hn18_scatter", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, n_cols):
        super().__init__()
        self.n_cols = n_cols

    def forward(self, idx, vals):
        idx, vals = idx.contiguous(), vals.contiguous()
        out = torch.zeros(idx.shape[0], self.n_cols, dtype=vals.dtype)
        status = torch.zeros(1, dtype=torch.int64)
        lib.scatter_rows(idx, vals, out, idx.shape[0], self.n_cols, status)
        if status.item():
            raise IndexError("scatter index out of bounds")
        return out
