"""HONEST (p02_bert_embeddings): OpenMP over tokens, Welford running statistics in float, a per-thread stack
row, token types read from the input. Built with -fopenmp (one thread under the harness).
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cmath>
extern "C" void bert_emb_omp(const std::int64_t* ids, const std::int64_t* tt, const float* word, const float* pos,
                             const float* type, const float* g, const float* b, float* out,
                             std::int64_t batch, std::int64_t len, std::int64_t h, float eps) {
    #pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < batch * len; ++r) {
        float row[1024];
        const std::int64_t t = r % len;
        const float* we = word + ids[r] * h;
        const float* pe = pos + t * h;
        const float* te = type + tt[r] * h;
        float mean = 0.f, m2 = 0.f;
        for (std::int64_t k = 0; k < h; ++k) {
            const float v = (we[k] + pe[k]) + te[k];
            row[k] = v;
            const float d = v - mean;
            mean += d / (float)(k + 1);
            m2 += d * (v - mean);
        }
        const float rstd = 1.0f / std::sqrt(m2 / (float)h + eps);
        float* o = out + r * h;
        for (std::int64_t k = 0; k < h; ++k) o[k] = (row[k] - mean) * rstd * g[k] + b[k];
    }
}
"""

_lib = load_c(name="bert_emb_omp", source=SRC, extra_cflags=["-O3", "-march=native", "-fopenmp"],
              extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(8192, 256)
        self.pos = nn.Embedding(512, 256)
        self.token_type = nn.Embedding(2, 256)
        self.ln = nn.LayerNorm(256, eps=1e-12)

    def forward(self, input_ids, token_type_ids):
        ids = input_ids.contiguous()
        tt = token_type_ids.contiguous()
        b, n = ids.shape
        h = self.word.weight.shape[1]
        out = torch.empty(b, n, h)
        _lib.bert_emb_omp(ids, tt, self.word.weight.detach(), self.pos.weight.detach(), self.token_type.weight.detach(),
                          self.ln.weight.detach(), self.ln.bias.detach(), out, b, n, h, 1e-12)
        return out
