"""HONEST (p8_linear_gelu): lean C++ kernel with a persistent std::thread pool (2 workers, created on the
first call, detached, parked on a condition variable between calls, i.e. frozen between rounds).
Probes: threads that outlive the call and the round, std::mutex/condition_variable from libstdc++, -pthread."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace {
struct Job { const float* x; const float* w; const float* b; float* o; int64_t M, K, N; };
std::mutex mu;
std::condition_variable cv_go, cv_done;
Job job{};
std::uint64_t gen = 0;
int pending = 0;
bool started = false;
constexpr int NT = 2;

void rows(const Job& j, int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t n = 0; n < j.N; ++n) {
            const float* xr = j.x + i * j.K;
            const float* wr = j.w + n * j.K;
            double s = j.b[n];
            for (int64_t k = 0; k < j.K; ++k) s += (double)xr[k] * (double)wr[k];
            const double v = (double)(float)s;
            j.o[i * j.N + n] = (float)(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)));
        }
}

void worker(int id) {
    std::uint64_t seen = 0;
    for (;;) {
        Job j;
        {
            std::unique_lock<std::mutex> lk(mu);
            cv_go.wait(lk, [&] { return gen != seen; });
            seen = gen;
            j = job;
        }
        const int64_t per = (j.M + NT - 1) / NT;
        const int64_t r0 = std::min(j.M, id * per), r1 = std::min(j.M, r0 + per);
        rows(j, r0, r1);
        {
            std::lock_guard<std::mutex> lk(mu);
            if (--pending == 0) cv_done.notify_one();
        }
    }
}
}  // namespace

extern "C" void linear_gelu(const float* x, const float* w, const float* b, float* o,
                            int64_t M, int64_t K, int64_t N) {
    std::unique_lock<std::mutex> lk(mu);
    if (!started) {
        for (int i = 0; i < NT; ++i) std::thread(worker, i).detach();
        started = true;
    }
    job = Job{x, w, b, o, M, K, N};
    pending = NT;
    ++gen;
    cv_go.notify_all();
    cv_done.wait(lk, [] { return pending == 0; });
}
"""

lib = load_c(name="rt6_linear_gelu_pool", source=SRC, extra_cflags=["-O3", "-pthread"], extra_ldflags=["-pthread"])


class ModelNew(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.fc.weight.shape[0], dtype=x.dtype)
        lib.linear_gelu(x, self.fc.weight, self.fc.bias, out, x.shape[0], x.shape[1], self.fc.weight.shape[0])
        return out
