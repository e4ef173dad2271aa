"""Honest (false-positive probe): the SE gate computed in C, returned exactly as the reference returns it -
an expand() view of the (B, C) gate. The reference's own output has stride 0 in H and W; this one too.
Expected here: output_layout (worker.layout_problem refuses a stride-0 output dim), although the output
is value-for-value and layout-for-layout what the Model returns."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
extern "C" int se_gate(const float* x, const float* w1, const float* b1, const float* w2, const float* b2,
                       float* gate, int64_t B, int64_t C, int64_t HW, int64_t R) {
    float* s = (float*)malloc(sizeof(float) * (C + R));
    if (!s) return -1;
    float* z = s + C;
    for (int64_t n = 0; n < B; ++n) {
        for (int64_t c = 0; c < C; ++c) {
            const float* p = x + (n * C + c) * HW;
            double acc = 0.0;
            for (int64_t i = 0; i < HW; ++i) acc += p[i];
            s[c] = (float)(acc / (double)HW);
        }
        for (int64_t r = 0; r < R; ++r) {
            double acc = b1[r];
            for (int64_t c = 0; c < C; ++c) acc += (double)w1[r * C + c] * s[c];
            z[r] = acc > 0.0 ? (float)acc : 0.0f;
        }
        for (int64_t c = 0; c < C; ++c) {
            double acc = b2[c];
            for (int64_t r = 0; r < R; ++r) acc += (double)w2[c * R + r] * z[r];
            gate[n * C + c] = (float)(1.0 / (1.0 + exp(-acc)));
        }
    }
    free(s);
    return 0;
}
"""

_lib = load_c(name="se_gate", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x):
        x = x.contiguous()
        b, c, h, w = x.shape
        gate = torch.empty(b, c, dtype=x.dtype)
        if _lib.se_gate(x, self.fc1.weight.detach(), self.fc1.bias.detach(), self.fc2.weight.detach(),
                        self.fc2.bias.detach(), gate, b, c, h * w, self.fc1.out_features) != 0:
            raise MemoryError("se_gate: scratch allocation failed")
        return gate[:, :, None, None].expand_as(x)
