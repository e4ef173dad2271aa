"""HONEST (p4_median_idx): nth_element per row for the lower median value, and the FIRST index holding it.
torch documents that median's index for a tied value "does not necessarily contain the first occurrence";
this kernel is within that contract. Probe: the `ties` transform compares index outputs exactly against
torch's implementation-defined choice (docs Known gaps: tie order)."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cstdint>
#include <vector>
extern "C" void median_rows(const float* x, float* vals, int64_t* idx, int64_t rows, int64_t cols) {
    std::vector<float> buf(cols);
    const int64_t k = (cols - 1) / 2;
    for (int64_t r = 0; r < rows; ++r) {
        const float* p = x + r * cols;
        std::copy(p, p + cols, buf.begin());
        std::nth_element(buf.begin(), buf.begin() + k, buf.end());
        const float m = buf[k];
        vals[r] = m;
        int64_t j = 0;
        while (j < cols && !(p[j] == m)) ++j;
        idx[r] = j;
    }
}
"""

lib = load_c(name="rt6_median", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        vals = torch.empty(x.shape[0], dtype=x.dtype)
        idx = torch.empty(x.shape[0], dtype=torch.int64)
        lib.median_rows(x, vals, idx, x.shape[0], x.shape[1])
        return vals, idx
