"""HONEST (p1_rnn_loop): the whole recurrence in one lean C call (double accumulation, tanh from libm).
Probe: a kernel that replaces a Python-loop reference; its own Python glue is one ctypes call."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
#include <vector>
extern "C" void rnn(const float* x, const float* U, const float* b, float* out,
                    int64_t B, int64_t T, int64_t H) {
    std::vector<float> h(H), hn(H);
    for (int64_t bi = 0; bi < B; ++bi) {
        for (int64_t j = 0; j < H; ++j) h[j] = 0.0f;
        for (int64_t t = 0; t < T; ++t) {
            const float* xt = x + (bi * T + t) * H;
            for (int64_t j = 0; j < H; ++j) {
                double mm = 0.0;
                for (int64_t k = 0; k < H; ++k) mm += (double)h[k] * (double)U[k * H + j];
                const float s = (float)((double)xt[j] + mm + (double)b[j]);
                hn[j] = std::tanh(s);
            }
            h.swap(hn);
        }
        for (int64_t j = 0; j < H; ++j) out[bi * H + j] = h[j];
    }
}
"""

lib = load_c(name="rt6_rnn", source=SRC, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.U = nn.Parameter(torch.empty(hidden, hidden))
        self.b = nn.Parameter(torch.empty(hidden))

    def forward(self, x):
        B, T, H = x.shape
        out = torch.empty(B, H, dtype=x.dtype)
        lib.rnn(x, self.U, self.b, out, B, T, H)
        return out
