"""Honest (redteam9 hn02, problem inplace_affine): the in-place kernel the reference is (its inputs are writable copies).

As written by redteam9:
HONEST (p01_inplace_affine): a faithful in-place kernel, exactly the reference's semantics (mutates x and
returns it), which KernelBench's own harness accepts.

Why the harness might reject it: the worker's inputs are views of a sealed memfd mapped PROT_READ
(shm.Region, F_SEAL_FUTURE_WRITE); the first store faults: worker_crash. The reference itself asks for the
in-place write, so the sandbox's read-only inputs make the problem unsolvable as specified.
Predicted: -1 (worker_crash; false positive).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void affine_inplace(float* x, const float* w, const float* b, int64_t n, int64_t c) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < c; ++j) x[i * c + j] = x[i * c + j] * w[j] + b[j];
}
"""

_lib = load_c(name="affine_inplace", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(c))
        self.bias = nn.Parameter(torch.empty(c))

    def forward(self, x):
        _lib.affine_inplace(x, self.weight, self.bias, x.shape[0], x.shape[1])
        return x
