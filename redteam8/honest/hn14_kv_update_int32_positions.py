"""Honest FP probe: the KV-cache update kernel takes int32 slot positions (the usual kernel ABI); forward converts
the 64 int64 positions with `pos.to(torch.int32)` (512 bytes of a 16 MB op).

Predicted rejection: `aten._to_copy` is not in blocking.ALLOWED_ATEN: blocked_torch_op in correctness round 1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" void kv_update32(const float* cache, const int32_t* pos, const float* rows, float* out,
                            int64_t slots, int64_t dim, int64_t k) {
    memcpy(out, cache, (size_t)(slots * dim) * sizeof(float));
    for (int64_t i = 0; i < k; ++i) memcpy(out + (int64_t)pos[i] * dim, rows + i * dim, (size_t)dim * sizeof(float));
}
"""

_lib = load_c(name="kv_update32", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, cache, pos, new):
        cache, new = cache.contiguous(), new.contiguous()
        pos32 = pos.to(torch.int32).contiguous()
        out = torch.empty_like(cache)
        _lib.kv_update32(cache, pos32, new, out, cache.shape[0], cache.shape[1], pos32.numel())
        return out
