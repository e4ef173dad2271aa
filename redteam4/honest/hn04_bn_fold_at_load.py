"""p2_batchnorm_fp64 honest: folds the BatchNorm into a per-channel scale and shift once, when the weights are
loaded (a load_state_dict post-hook, float64 torch ops outside forward: constant folding, as inference engines
do), and applies them in its own C kernel. The folded tensors are plain attributes, so the state dict's keys stay
the reference's."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void scale_shift(const double* x, const double* alpha, const double* beta, double* y,
                            int64_t n, int64_t c, int64_t hw) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < c; ++k) {
            const double a = alpha[k], b = beta[k];
            const double* xs = x + (i * c + k) * hw;
            double* ys = y + (i * c + k) * hw;
            for (int64_t j = 0; j < hw; ++j) ys[j] = xs[j] * a + b;
        }
}
"""

lib = load_c(name="rt4_bn_scale_shift", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, num_features, eps):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features, eps=eps, dtype=torch.float64)
        self._fold()
        self.register_load_state_dict_post_hook(lambda module, incompatible: module._fold())

    @torch.no_grad()
    def _fold(self):
        bn = self.bn
        alpha = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
        self.alpha = alpha.contiguous()
        self.beta = (bn.bias.detach() - bn.running_mean * alpha).contiguous()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, h, w = x.shape
        lib.scale_shift(x, self.alpha, self.beta, y, n, c, h * w)
        return y
