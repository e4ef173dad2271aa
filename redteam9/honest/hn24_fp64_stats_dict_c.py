"""HONEST (p13_fp64_stats_dict): one C function fills the float64 row means and RETURNS the grand total as a C
`double` (lean functions return their scalar: runtime.CLib restype from DWARF); forward builds the dict.
Plausible: dict outputs, a Python-float leaf from a C return value, fp64 throughout (budget 1e-10).
Why the harness might reject it: its summation order differs from torch's (vectorised, pairwise); the total
is summed from row sums in double, error ~1e-13 relative, inside the float64 leaf budget. Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" double row_stats(const double* x, double* mean, int64_t rows, int64_t cols) {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        const double* xr = x + r * cols;
        int64_t j = 0;
        for (; j + 4 <= cols; j += 4) { s0 += xr[j]; s1 += xr[j + 1]; s2 += xr[j + 2]; s3 += xr[j + 3]; }
        for (; j < cols; ++j) s0 += xr[j];
        const double s = (s0 + s1) + (s2 + s3);
        mean[r] = s / (double)cols;
        total += s;
    }
    return total;
}
"""

_lib = load_c(name="row_stats_f64", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        mean = torch.empty(x.shape[0], dtype=torch.float64)
        total = _lib.row_stats(x, mean, x.shape[0], x.shape[1])
        return {"row_mean": mean, "total": total}
