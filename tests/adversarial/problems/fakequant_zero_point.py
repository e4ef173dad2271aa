"""(redteam10 p02, smaller) Per-tensor uint8 fake quantisation (quantise-dequantise) with its parameters held as persistent buffers, as
torch.ao's FakeQuantize keeps them: a float `scale` of shape (1,) and an int32 `zero_point` of shape (1,)."""
import torch
import torch.nn as nn

N = 256
D = 128
QMIN = 0
QMAX = 255


class Model(nn.Module):
    def __init__(self, qmin, qmax):
        super().__init__()
        self.qmin = qmin
        self.qmax = qmax
        self.register_buffer("scale", torch.tensor([0.02]))
        self.register_buffer("zero_point", torch.tensor([128], dtype=torch.int32))

    def forward(self, x):
        q = torch.clamp(torch.round(x / self.scale) + self.zero_point, self.qmin, self.qmax)
        return (q - self.zero_point) * self.scale


def get_inputs():
    return [torch.randn(N, D)]


def get_init_inputs():
    return [QMIN, QMAX]
