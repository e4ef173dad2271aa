"""Honest (false-positive probe): the SE gate computed in C and MATERIALISED - a fresh contiguous (B, C, H, W)
tensor holding the broadcast gate, the layout the harness asks candidates for. Its correctness rounds pass
(the parent compares values with its own reference). But the eager baseline party runs the Model in a worker,
whose output is the reference's expand() view: worker.Server._output -> layout_problem refuses it there
("output dim 2 has stride 0"), evaluate._Evaluation.run raises "the reference baseline failed on warm-up 0"
and the exception boundary turns it into harness_error (reward -1). Expected here: harness_error, for any
solution of a problem whose reference returns a view with a stride-0 dim (profile=False would pass it)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
extern "C" int se_gate_full(const float* x, const float* w1, const float* b1, const float* w2, const float* b2,
                       float* out, int64_t B, int64_t C, int64_t HW, int64_t R) {
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
            const float g = (float)(1.0 / (1.0 + exp(-acc)));
            float* o = out + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; ++i) o[i] = g;
        }
    }
    free(s);
    return 0;
}
"""

_lib = load_c(name="se_gate_full", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x):
        x = x.contiguous()
        b, c, h, w = x.shape
        out = torch.empty_like(x)
        if _lib.se_gate_full(x, self.fc1.weight.detach(), self.fc1.bias.detach(), self.fc2.weight.detach(),
                        self.fc2.bias.detach(), out, b, c, h * w, self.fc1.out_features) != 0:
            raise MemoryError("se_gate_full: scratch allocation failed")
        return out
