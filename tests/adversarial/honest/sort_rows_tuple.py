"""Honest (redteam9 hn10, problem sort_stable_rows): a stable sort returning a tuple; the reference a torch.return_types.sort.

As written by redteam9:
HONEST (p06_sort_stable): per-row `std::stable_sort` of an index array by value (ties keep input order, as
`stable=True` documents), values gathered after; returns (values, indices) as a plain tuple, which is what
every KernelBench solution of a sort returns.

Why the harness might reject it: the reference returns `torch.return_types.sort` (a structseq, a tuple
subclass). shm.layout records it as a plain "tuple", the parent rebuilds the candidate's output as a plain
tuple (`read_remote`), and correctness.compare starts with `type(actual) is not type(expected)` ->
output_type on trial 0, whatever the candidate returns. Predicted: -1 (false positive).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <algorithm>
#include <numeric>
#include <vector>
extern "C" void sort_rows(const float* x, float* vals, int64_t* idx, int64_t rows, int64_t cols) {
    std::vector<int64_t> perm(cols);
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        std::iota(perm.begin(), perm.end(), 0);
        std::stable_sort(perm.begin(), perm.end(), [xr](int64_t a, int64_t b) { return xr[a] < xr[b]; });
        for (int64_t j = 0; j < cols; ++j) { idx[r * cols + j] = perm[j]; vals[r * cols + j] = xr[perm[j]]; }
    }
}
"""

_lib = load_c(name="sort_rows_stable", source=SRC, extra_cflags=["-O2", "-std=c++17"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        vals = torch.empty_like(x)
        idx = torch.empty(x.shape, dtype=torch.int64)
        _lib.sort_rows(x, vals, idx, x.shape[0], x.shape[1])
        return vals, idx
