"""Honest (false-positive probe): an OpenMP row kernel that writes each row's result into its own 64-byte
slot (no false sharing between threads) and returns the column of slots as a strided view (stride 16
floats). Correct values, no overlap, a legal torch tensor. Expected here: output_layout (shm.strided_runs:
span 16x the elements' bytes, over SPAN_FACTOR = 4 and SPAN_MIN = 64 KiB for 2048 rows)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
#define SLOT 16
extern "C" void smooth_max_slots(const float* x, float* slots, int64_t rows, int64_t cols, float tau) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -INFINITY;
        for (int64_t i = 0; i < cols; ++i) { const float y = xr[i] / tau; m = y > m ? y : m; }
        if (isinf(m)) { slots[r * SLOT] = tau * m; continue; }
        double s = 0.0;
        for (int64_t i = 0; i < cols; ++i) s += exp((double)(xr[i] / tau) - (double)m);
        slots[r * SLOT] = tau * (float)((double)m + log(s));
    }
}
"""

_lib = load_c(name="smooth_max_slots", source=SRC, extra_cflags=["-O3", "-march=native", "-fopenmp"],
              extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, tau: float):
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        slots = torch.empty(rows, 16, dtype=x.dtype)
        _lib.smooth_max_slots(x, slots, rows, cols, float(tau))
        return slots[:, 0].view(x.shape[:-1])
