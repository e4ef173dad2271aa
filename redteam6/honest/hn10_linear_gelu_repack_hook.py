"""HONEST (p8_linear_gelu): lean C linear + exact GELU on a K-major copy of the weight made ONCE per weight
load by a load_state_dict post-hook (into a non-persistent buffer, so the state dict is unchanged).
Probes: weight repacking at load (untimed, input-independent), a non-persistent buffer."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
#include <vector>
extern "C" void linear_gelu(const float* x, const float* wt, const float* b, float* out,
                            int64_t M, int64_t K, int64_t N) {
    std::vector<double> acc(N);
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) acc[j] = b[j];
        for (int64_t k = 0; k < K; ++k) {
            const double a = x[i * K + k];
            const float* w = wt + k * N;
            for (int64_t j = 0; j < N; ++j) acc[j] += a * w[j];
        }
        for (int64_t j = 0; j < N; ++j) {
            const double v = (double)(float)acc[j];
            out[i * N + j] = (float)(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)));
        }
    }
}
"""

lib = load_c(name="rt6_linear_gelu", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)
        self.register_buffer("wt", torch.empty(fin, fout), persistent=False)
        self._repack()
        self.register_load_state_dict_post_hook(lambda module, keys: module._repack())

    def _repack(self):
        with torch.no_grad():
            self.wt.copy_(self.fc.weight.t())

    def forward(self, x):
        out = torch.empty(x.shape[0], self.wt.shape[1], dtype=x.dtype)
        lib.linear_gelu(x, self.wt, self.fc.bias, out, x.shape[0], x.shape[1], self.wt.shape[1])
        return out
