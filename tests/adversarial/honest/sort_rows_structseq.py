"""Honest (redteam9 hn11, problem sort_stable_rows): returns torch.return_types.sort as torch does.

As written by redteam9:
HONEST (p06_sort_stable): the same kernel, but the solution mirrors the reference's return type exactly:
`torch.return_types.sort((vals, idx))`, so `ModelNew(x)` is indistinguishable from `torch.sort`'s result.

Why the harness might reject it: the worker accepts any tuple subclass (`isinstance(out, (list, tuple))`)
but only sends addresses; the parent builds a plain tuple from the layout, so the structseq type never
reaches the comparison and `compare`'s exact type check fails as for hn10. Predicted: -1 (output_type).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <algorithm>
#include <vector>
extern "C" void sort_rows2(const float* x, float* vals, int64_t* idx, int64_t rows, int64_t cols) {
    std::vector<std::pair<float, int64_t>> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < cols; ++j) row[j] = {x[r * cols + j], j};
        std::stable_sort(row.begin(), row.end(),
                         [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) { return a.first < b.first; });
        for (int64_t j = 0; j < cols; ++j) { vals[r * cols + j] = row[j].first; idx[r * cols + j] = row[j].second; }
    }
}
"""

_lib = load_c(name="sort_rows_structseq", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        vals = torch.empty_like(x)
        idx = torch.empty(x.shape, dtype=torch.int64)
        _lib.sort_rows2(x, vals, idx, x.shape[0], x.shape[1])
        return torch.return_types.sort((vals, idx))
