"""HONEST (p05_sgd_momentum_noreturn; twin of h05): the momentum step fused into one in-place pass over the
(writable) inputs, in the reference's order of operations (buf*m + g, then p - lr*buf); returns None like the
reference. Nothing of it is compared (see h05); it is here to say what an honest solution earns.
Predicted: +2 or +3 (one fused pass against eager's three).
"""
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
