"""SPEED HACK (p07_linear_chain): fold the two Linear layers into one (W = W2 @ W1, b = W2 @ b1 + b2) in a
`load_state_dict` post-hook, i.e. at load, out of every round; forward is then one DIMxDIM matmul instead of
DIMxHIDDEN plus HIDDENxDIM (8x fewer FLOPs than the reference per call).

Mechanism: worker.py `Server.load` calls `self.model.load_state_dict(...)` once, before any round, while the
tree is outside the timed window (rounds are the only thawed, clocked phase; docs: load-time work is not on
the clock, and post-hooks are the documented place to pack weights). The fold is not packing: it is half the
problem's arithmetic (a weight-only matmul) moved out of the clock, and it re-associates (x W1^T) W2^T, which
the fp32 tolerance absorbs. Intent: must not out-earn its honest twin hn12 (predicted: it does, +2/+3 vs +1).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
// Wf[d][e] = sum_h W2[d][h] * W1[h][e];  bf[d] = b2[d] + sum_h W2[d][h] * b1[h]
extern "C" void fold(const float* w1, const float* b1, const float* w2, const float* b2,
                     float* wf, float* bf, int64_t dim, int64_t hid) {
    memset(wf, 0, sizeof(float) * dim * dim);
    for (int64_t d = 0; d < dim; ++d) {
        double acc = b2[d];
        for (int64_t h = 0; h < hid; ++h) {
            const float a = w2[d * hid + h];
            acc += (double)a * b1[h];
            const float* r = w1 + h * dim;
            float* o = wf + d * dim;
            for (int64_t e = 0; e < dim; ++e) o[e] += a * r[e];
        }
        bf[d] = (float)acc;
    }
}
// y[b][d] = bf[d] + sum_e x[b][e] * Wf[d][e]
extern "C" void linear(const float* x, const float* w, const float* bias, float* y,
                       int64_t batch, int64_t in, int64_t out) {
    for (int64_t b = 0; b < batch; ++b) {
        const float* xr = x + b * in;
        for (int64_t d = 0; d < out; ++d) {
            const float* wr = w + d * in;
            float acc = 0.f;
            for (int64_t e = 0; e < in; ++e) acc += xr[e] * wr[e];
            y[b * out + d] = acc + bias[d];
        }
    }
}
"""

_lib = load_c(name="linear_fold", source=SRC, extra_cflags=["-O3", "-march=native", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self._wf = torch.empty(dim, dim)
        self._bf = torch.empty(dim)
        self._folded = False
        self.register_load_state_dict_post_hook(ModelNew._refold)

    @staticmethod
    def _refold(module, incompatible):
        module._do_fold()

    def _do_fold(self):
        with torch.no_grad():
            _lib.fold(self.up.weight.detach().contiguous(), self.up.bias.detach().contiguous(),
                      self.down.weight.detach().contiguous(), self.down.bias.detach().contiguous(),
                      self._wf, self._bf, self._wf.shape[0], self.up.weight.shape[0])
        self._folded = True

    def forward(self, x):
        if not self._folded:
            self._do_fold()
        x = x.contiguous()
        y = torch.empty(x.shape[0], self._wf.shape[0], dtype=x.dtype)
        _lib.linear(x, self._wf, self._bf, y, x.shape[0], x.shape[1], self._wf.shape[0])
        return y
