"""RMSNorm on bfloat16 activations with a bfloat16 weight, computed in float32 and returned in bfloat16."""
import torch
import torch.nn as nn

R = 4096
D = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D, dtype=torch.bfloat16))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (y * self.weight.float()).to(torch.bfloat16)


def get_inputs():
    return [torch.randn(R, D).to(torch.bfloat16)]


def get_init_inputs():
    return []
