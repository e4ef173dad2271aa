"""p4: tanh-GELU in a torch binding with ATen's own vector type (at::vec::Vectorized<float>): its tanh() calls the
Sleef bundled in libtorch_cpu from the candidate's code; fp16 <-> fp32 through c10::Half (round to nearest even)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <ATen/cpu/vec/vec.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

using Vec = at::vec::Vectorized<float>;

static void gelu_span(const c10::Half* x, c10::Half* out, int64_t n) {
    constexpr int64_t B = 256;
    alignas(64) float a[B];
    const Vec half(0.5f), one(1.0f), k0(0.7978845608028654f), k1(0.044715f);
    for (int64_t s = 0; s < n; s += B) {
        const int64_t m = std::min<int64_t>(B, n - s);
        for (int64_t i = 0; i < m; ++i) a[i] = (float)x[s + i];
        int64_t i = 0;
        for (; i + Vec::size() <= m; i += Vec::size()) {
            Vec v = Vec::loadu(a + i);
            Vec inner = k0 * (v + k1 * v * v * v);
            Vec r = half * v * (one + inner.tanh());
            r.store(a + i);
        }
        for (; i < m; ++i) {
            const float v = a[i];
            a[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        for (int64_t j = 0; j < m; ++j) out[s + j] = c10::Half(a[j]);
    }
}

torch::Tensor gelu_tanh(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == at::kHalf, "fp16 only");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const c10::Half* px = x.data_ptr<c10::Half>();
    c10::Half* po = out.data_ptr<c10::Half>();
    at::parallel_for(0, x.numel(), 1 << 16, [&](int64_t b, int64_t e) { gelu_span(px + b, po + b, e - b); });
    return out;
}
"""
ext = load_inline(name="hn26_gelu", cpp_sources=CPP, functions=["gelu_tanh"],
                  extra_cflags=["-O3", "-mavx2", "-mfma", "-DCPU_CAPABILITY_AVX2", "-DCPU_CAPABILITY=AVX2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.gelu_tanh(x)
