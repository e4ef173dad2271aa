"""HONEST (redteam10 hn09): the momentum step fused into one in-place pass; returns None as the reference does."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void sgd_momentum_(float* p, const float* g, float* b, int64_t n, float neg_lr, float mom) {
    for (int64_t i = 0; i < n; ++i) {
        const float nb = b[i] * mom + g[i];
        b[i] = nb;
        p[i] = p[i] + neg_lr * nb;
    }
}
"""

_lib = load_c(name="sgd_momentum_inplace", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, lr, momentum):
        super().__init__()
        self.lr = float(lr)
        self.momentum = float(momentum)

    def forward(self, param, grad, buf):
        _lib.sgd_momentum_(param, grad, buf, param.numel(), -self.lr, self.momentum)
