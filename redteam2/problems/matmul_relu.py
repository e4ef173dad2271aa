# Problem: relu(x @ W^T + b), a square 512 x 512 x 512 linear layer (compute bound). float32.
import torch
import torch.nn as nn

M = 512
K = 512
N = 512


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]
