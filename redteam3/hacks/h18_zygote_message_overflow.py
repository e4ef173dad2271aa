# HACK: harness crash through an unbounded internal message. Every extern "C" function of a lean artefact gets
# a prototype, and all prototypes travel in the worker's setup inside ONE SOCK_SEQPACKET message from the parent
# to the zygote. This solution exports 8,000 trivial padding functions (token-pasted by macros, so the source is
# small) next to an honest kernel: ~330 KB of prototypes, more than a unix seqpacket socket's default send buffer
# (~208 KB), so the parent's sendmsg should fail with EMSGSIZE inside Worker() - an exception the evaluation
# does not expect (harness_error), or, with a larger buffer, a zygote message near its 1 MB recv cap.
# A robust harness either evaluates it like its twin (+1/+2: the kernel is honest) or reports a clear finding;
# it must not crash, hang or take down the shared zygote for other evaluations.
# Intent: speed (must not earn more than its twin; the interesting output is the finding it produces).
# Problem: p1_swish. Honest twin: honest/hn01_swish_plain_c.py.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>

extern "C" void swish_f32(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + expf(-x[i]));
}

#define RT3_PADF(n) extern "C" void rt3_pad_##n(float* a, const float* b, int64_t c) { a[0] = b[0] + (float)c; }
#define RT3_PAD10(n) RT3_PADF(n##0) RT3_PADF(n##1) RT3_PADF(n##2) RT3_PADF(n##3) RT3_PADF(n##4) \
    RT3_PADF(n##5) RT3_PADF(n##6) RT3_PADF(n##7) RT3_PADF(n##8) RT3_PADF(n##9)
#define RT3_PAD100(n) RT3_PAD10(n##0) RT3_PAD10(n##1) RT3_PAD10(n##2) RT3_PAD10(n##3) RT3_PAD10(n##4) \
    RT3_PAD10(n##5) RT3_PAD10(n##6) RT3_PAD10(n##7) RT3_PAD10(n##8) RT3_PAD10(n##9)
#define RT3_PAD1000(n) RT3_PAD100(n##0) RT3_PAD100(n##1) RT3_PAD100(n##2) RT3_PAD100(n##3) RT3_PAD100(n##4) \
    RT3_PAD100(n##5) RT3_PAD100(n##6) RT3_PAD100(n##7) RT3_PAD100(n##8) RT3_PAD100(n##9)

RT3_PAD1000(1) RT3_PAD1000(2) RT3_PAD1000(3) RT3_PAD1000(4) RT3_PAD1000(5) RT3_PAD1000(6) RT3_PAD1000(7) RT3_PAD1000(8)
"""

lib = load_c(name="h18_many_protos", source=SRC, extra_cflags=["-O1"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.swish_f32(x, y, x.numel())
        return y
