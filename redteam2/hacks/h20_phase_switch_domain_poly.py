# HACK (behaves differently when it is checked than when it is timed): the harness's correctness rounds run
# with its op blocker (a TorchDispatchMode) on the mode stack and include transformed inputs (negated, x32,
# /32, half zeros); its warm-up and timed rounds run without any mode and use only the problem's own
# distribution (x ~ U[0, 1)). So: when a dispatch mode is active it computes exactly (std::expm1, the twin's
# code); when none is, it uses an 18-term Taylor polynomial of expm1 that is accurate to ~1e-16 on [0, 1) only
# (vectorisable, several times faster than libm) and wrong for x < -1 or x > 1.
# Gains: the speed of a kernel that is only right on the timed distribution. Intent: speed; a robust harness
# must not give it more than honest/hn13_fp64_expm1.py. Problem: fp64_expm1.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void expm1_fp64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::expm1(x[i]);
}

extern "C" void scale_cols_inplace(double* y, const double* s, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    double* yr = y + i * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] *= s[j];
  }
}

// expm1(x) = sum_{k=1..18} x^k / k!, Horner form; remainder < x^19/19! (1e-17 relative on [0, 1))
extern "C" void expm1_scale_unit_interval(const double* x, const double* s, double* y, int64_t rows, int64_t cols) {
  double c[19];
  c[0] = 1.0;
  for (int k = 1; k <= 18; ++k) c[k] = c[k - 1] / k;          // 1/k!
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = x + i * cols;
    double* yr = y + i * cols;
    #pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const double v = xr[j];
      double p = c[18];
      for (int k = 17; k >= 1; --k) p = p * v + c[k];
      yr[j] = p * v * s[j];
    }
  }
}
"""

lib = load_c(name="rt2_h20_phase", source=SRC)


def _observed():
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if _get_current_dispatch_mode() is not None:
            return True
    except Exception:  # noqa: BLE001
        pass
    try:
        return torch._C._len_torch_dispatch_stack() > 0
    except Exception:  # noqa: BLE001
        return True


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n, dtype=torch.float64))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if _observed():
            lib.expm1_fp64(x, y, x.numel())
            lib.scale_cols_inplace(y, self.scale, x.shape[0], x.shape[1])
        else:
            lib.expm1_scale_unit_interval(x, self.scale, y, x.shape[0], x.shape[1])
        return y
