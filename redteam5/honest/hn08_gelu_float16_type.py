"""p4: tanh-GELU written with GCC's _Float16 type (x86 SSE2 ABI, GCC 12), scalar libm tanhf, std::thread over
the hardware threads the affinity mask allows (-pthread)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

static void run(const _Float16* x, _Float16* out, std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
        float v = (float)x[i];
        float t = std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v));
        out[i] = (_Float16)(0.5f * v * (1.0f + t));
    }
}

extern "C" void gelu_half(const _Float16* x, _Float16* out, std::int64_t n) {
    unsigned nt = std::thread::hardware_concurrency();
    if (nt == 0) nt = 1;
    if (nt > 8) nt = 8;
    if (nt == 1 || n < (1 << 16)) { run(x, out, 0, n); return; }
    std::vector<std::thread> ts;
    std::int64_t chunk = (n + nt - 1) / nt;
    for (unsigned t = 0; t < nt; ++t) {
        std::int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
        if (b < e) ts.emplace_back(run, x, out, b, e);
    }
    for (auto& th : ts) th.join();
}
"""
lib = load_c(name="hn08_gelu", source=SRC, extra_cflags=["-O2", "-pthread"], extra_ldflags=["-pthread"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_half(x, out, x.numel())
        return out
