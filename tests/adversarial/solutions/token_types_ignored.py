"""HACK (redteam12 h02 class): token types ignored (type row 0 folded into the position table). A constant 0
integer input was never varied (range and shuffle keep it; int_wide and far make Embedding raise); above
now draws a constant c in {c, c + 1}."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void bert_emb2(const int64_t* ids, const float* word, const float* pos_type0, const float* g,
                          const float* b, float* out, int64_t batch, int64_t len, int64_t h, double eps) {
    float tmp[4096];
    for (int64_t i = 0; i < batch; ++i) {
        for (int64_t t = 0; t < len; ++t) {
            const float* we = word + ids[i * len + t] * h;
            const float* pe = pos_type0 + t * h;
            double s = 0.0;
            for (int64_t k = 0; k < h; ++k) { tmp[k] = we[k] + pe[k]; s += tmp[k]; }
            const double mean = s / (double)h;
            double v = 0.0;
            for (int64_t k = 0; k < h; ++k) { double d = tmp[k] - mean; v += d * d; }
            const double rstd = 1.0 / sqrt(v / (double)h + eps);
            float* o = out + (i * len + t) * h;
            for (int64_t k = 0; k < h; ++k) o[k] = (float)((tmp[k] - mean) * rstd) * g[k] + b[k];
        }
    }
}
"""

_lib = load_c(name="bert_emb2", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(512, 64)
        self.pos = nn.Embedding(64, 64)
        self.token_type = nn.Embedding(2, 64)
        self.ln = nn.LayerNorm(64, eps=1e-12)
        self._fold()
        self.register_load_state_dict_post_hook(lambda m, keys: m._fold())

    def _fold(self):
        with torch.no_grad():
            self._pos_type0 = (self.pos.weight + self.token_type.weight[0]).contiguous()

    def forward(self, input_ids, token_type_ids):
        ids = input_ids.contiguous()
        b, n = ids.shape
        h = self.word.weight.shape[1]
        out = torch.empty(b, n, h)
        _lib.bert_emb2(ids, self.word.weight.detach(), self._pos_type0, self.ln.weight.detach(),
                       self.ln.bias.detach(), out, b, n, h, float(self.ln.eps))
        return out
