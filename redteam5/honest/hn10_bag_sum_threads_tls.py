"""p5: bag sum with std::thread workers, a thread_local accumulator (TLS: __tls_get_addr in a shared object) and
a bounds check that raises nothing (indices are in range by the problem's contract)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <thread>
#include <vector>

static thread_local std::vector<double> acc;

static void work(const float* w, const std::int64_t* idx, float* out, std::int64_t b0, std::int64_t b1,
                 std::int64_t k, std::int64_t d) {
    acc.assign((size_t)d, 0.0);
    for (std::int64_t b = b0; b < b1; ++b) {
        for (std::int64_t j = 0; j < d; ++j) acc[j] = 0.0;
        for (std::int64_t t = 0; t < k; ++t) {
            const float* row = w + idx[b * k + t] * d;
            for (std::int64_t j = 0; j < d; ++j) acc[j] += row[j];
        }
        for (std::int64_t j = 0; j < d; ++j) out[b * d + j] = (float)acc[j];
    }
}

extern "C" void bag_sum_mt(const float* w, const std::int64_t* idx, float* out, std::int64_t bags, std::int64_t k,
                           std::int64_t d) {
    unsigned nt = std::thread::hardware_concurrency();
    if (nt < 1) nt = 1;
    if (nt > 4) nt = 4;
    if (nt == 1) { work(w, idx, out, 0, bags, k, d); return; }
    std::vector<std::thread> ts;
    std::int64_t chunk = (bags + nt - 1) / nt;
    for (unsigned t = 0; t < nt; ++t) {
        std::int64_t b0 = t * chunk, b1 = b0 + chunk < bags ? b0 + chunk : bags;
        if (b0 < b1) ts.emplace_back(work, w, idx, out, b0, b1, k, d);
    }
    for (auto& th : ts) th.join();
}
"""
lib = load_c(name="hn10_bag", source=SRC, extra_cflags=["-O3", "-pthread", "-fno-semantic-interposition"],
             extra_ldflags=["-pthread"])


class ModelNew(nn.Module):
    def __init__(self, v, d):
        super().__init__()
        self.emb = nn.Embedding(v, d)

    def forward(self, idx):
        idx = idx.contiguous()
        w = self.emb.weight.detach().contiguous()
        out = torch.empty(idx.shape[0], w.shape[1], dtype=w.dtype)
        lib.bag_sum_mt(w, idx, out, idx.shape[0], idx.shape[1], w.shape[1])
        return out
