"""(redteam10 p01, smaller) Signed power activation whose exponent is a forward argument (a Python float): torch.pow(x, p), here p = 3.0
on signed inputs. On negative bases torch.pow is real only for integral exponents (a non-integral p gives NaN
there), so the reference is well defined only at isolated values of p."""
import torch
import torch.nn as nn

N = 256
D = 128
EXPONENT = 3.0


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, p):
        return torch.pow(x, p)


def get_inputs():
    return [torch.randn(N, D), EXPONENT]


def get_init_inputs():
    return []
