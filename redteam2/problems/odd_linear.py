# Problem: tanh(Linear(17 -> 31)) on 1023 rows: odd, small shapes where fixed per-call overhead matters.
import torch
import torch.nn as nn

M = 1023
K = 17
N = 31


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]


SHAPE_VARIANTS = [{"M": 1}, {"M": 4097}]
