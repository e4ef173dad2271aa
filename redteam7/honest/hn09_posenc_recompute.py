"""Honest (false-positive probe): the sinusoidal encoding generated inside the kernel (the usual fused
positional-encoding kernel), the pe buffer kept only so the reference's state dict loads. Exact for the
Model as written (pe is a deterministic function of position and d_model), but the harness perturbs every
floating persistent buffer (correctness.perturb_buffers: pe * exp(0.5 randn)), so a kernel that does not read
pe is wrong against the perturbed reference. Expected here: output_mismatch on the first trial."""
import math

import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
extern "C" int posenc_add(const float* x, float* out, int64_t B, int64_t T, int64_t D) {
    float* div = (float*)malloc(sizeof(float) * (D / 2 + 1));
    if (!div) return -1;
    const float k = (float)(-log(10000.0) / (double)D);
    for (int64_t i = 0; i < D; i += 2) div[i / 2] = expf((float)i * k);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < D; ++i) {
            const float a = (float)t * div[i / 2];
            const float pe = (i % 2 == 0) ? sinf(a) : cosf(a);
            for (int64_t b = 0; b < B; ++b) {
                const int64_t o = (b * T + t) * D + i;
                out[o] = x[o] + pe;
            }
        }
    }
    free(div);
    return 0;
}
"""

_lib = load_c(name="posenc_add", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)  # kept for load_state_dict; the kernel generates it

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        b, t, d = x.shape
        if _lib.posenc_add(x, out, b, t, d) != 0:
            raise MemoryError("posenc_add: scratch allocation failed")
        return out
