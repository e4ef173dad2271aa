"""(redteam10 p05, smaller) One SGD-with-momentum step applied in place, as an optimiser does it: the momentum buffer and the parameter
are updated in place and nothing is returned (torch.optim style)."""
import torch
import torch.nn as nn

NUMEL = 1 << 14
LR = 0.01
MOMENTUM = 0.9


class Model(nn.Module):
    def __init__(self, lr, momentum):
        super().__init__()
        self.lr = lr
        self.momentum = momentum

    def forward(self, param, grad, buf):
        buf.mul_(self.momentum).add_(grad)
        param.add_(buf, alpha=-self.lr)


def get_inputs():
    return [torch.randn(NUMEL), torch.randn(NUMEL) * 0.1, torch.randn(NUMEL) * 0.01]


def get_init_inputs():
    return [LR, MOMENTUM]
