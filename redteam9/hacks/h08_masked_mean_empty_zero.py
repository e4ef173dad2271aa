"""HACK (p08_masked_rowmean): divide by max(count, 1), so a row with nothing selected gives 0, not torch's NaN
(0/0); the `torch.rand < 0.3` mask of 512 columns never draws an all-False row naturally (0.7^512).

Mechanism it tests: correctness.py `extra_variants` `empty` (one last-dim row in 8 forced all False) and the
`redraw` variants of bool inputs (evaluate.py `_plan_discrete`), and NaN-must-match-NaN in `mismatches`.
Predicted: rejected (-1, output_mismatch on the `redraw empty` round). Included as a control of the
bool-input domain class.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void masked_mean(const float* x, const uint8_t* m, float* mean, int64_t* cnt,
                            int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.f; int64_t c = 0;
        for (int64_t j = 0; j < cols; ++j) if (m[r * cols + j]) { s += x[r * cols + j]; ++c; }
        cnt[r] = c;
        mean[r] = s / (float)(c > 0 ? c : 1);
    }
}
"""

_lib = load_c(name="masked_mean_zero", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        x, mask = x.contiguous(), mask.contiguous()
        mean = torch.empty(x.shape[0], dtype=x.dtype)
        cnt = torch.empty(x.shape[0], dtype=torch.int64)
        _lib.masked_mean(x, mask, mean, cnt, x.shape[0], x.shape[1])
        return mean, cnt
