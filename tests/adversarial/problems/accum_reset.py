"""(redteam10 p06, smaller) Gradient-accumulation step: apply the accumulated update to the parameter in place, reset the accumulator in
place for the next micro-batches, return the updated parameter."""
import torch
import torch.nn as nn

NUMEL = 1 << 14
LR = 0.05


class Model(nn.Module):
    def __init__(self, lr):
        super().__init__()
        self.lr = lr

    def forward(self, param, acc):
        param.add_(acc, alpha=-self.lr)
        acc.zero_()
        return param


def get_inputs():
    return [torch.randn(NUMEL), torch.randn(NUMEL) * 0.1]


def get_init_inputs():
    return [LR]
