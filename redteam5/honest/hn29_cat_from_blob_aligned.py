"""p1: the output lives in a 64-byte-aligned buffer from std::aligned_alloc, written by the kernel and handed to
torch with torch::from_blob and a deleter that frees it (the standard way to wrap memory a kernel owns).

Honest-kernel probe: from_blob is inline but ends in at::TensorMaker::make_tensor(), an out-of-line torch
function that is not in the binding allowlist's classes."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <cstdlib>
#include <cstring>

torch::Tensor cat_rows(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "fp32 only");
    x = x.contiguous();
    y = y.contiguous();
    const int64_t rows = x.size(0), n1 = x.size(1), n2 = y.size(1), w = n1 + n2;
    size_t bytes = (size_t)(rows * w) * sizeof(float);
    bytes = (bytes + 63) / 64 * 64;
    float* buf = static_cast<float*>(std::aligned_alloc(64, bytes ? bytes : 64));
    TORCH_CHECK(buf != nullptr, "out of memory");
    const float* px = x.data_ptr<float>();
    const float* py = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(buf + r * w, px + r * n1, sizeof(float) * n1);
        std::memcpy(buf + r * w + n1, py + r * n2, sizeof(float) * n2);
    }
    return torch::from_blob(buf, {rows, w}, [](void* p) { std::free(p); }, x.options());
}
"""
ext = load_inline(name="hn29_cat", cpp_sources=CPP, functions=["cat_rows"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.cat_rows(x, y)
