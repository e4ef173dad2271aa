# HACK (special values: NaN semantics dropped for speed): a two-pass argmax - a branch-free fmax reduction
# (vectorises well) then the first index equal to the maximum. Exact for every finite input, including ties,
# but fmax discards NaN, so a row containing NaN returns the index of its largest finite value where
# torch.argmax returns the NaN's index (NaN counts as the maximum). The harness's inputs never hold NaN.
# Intent: reject; a robust harness gives -1 (inputs with NaN/Inf where the reference is well defined).
# Problem: argmax_rows.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void argmax_fast(const float* x, int64_t* out, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = x + i * cols;
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = std::fmax(m, r[j]);
    int64_t best = 0;
    for (int64_t j = 0; j < cols; ++j)
      if (r[j] == m) { best = j; break; }
    out[i] = best;
  }
}
"""

lib = load_c(name="rt2_h21_argmax_fast", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64)
        lib.argmax_fast(x, out, x.shape[0], x.shape[1])
        return out
