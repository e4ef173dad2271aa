"""A tiny Elman recurrence run as a Python loop over time steps (eager pays Python dispatch for every op)."""
import torch
import torch.nn as nn

BATCH, STEPS, HIDDEN = 1, 64, 8


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.U = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
        self.b = nn.Parameter(torch.randn(hidden) * 0.1)

    def forward(self, x):
        h = torch.zeros(x.shape[0], x.shape[2], dtype=x.dtype)
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] + h @ self.U + self.b)
        return h


def get_inputs():
    return [torch.randn(BATCH, STEPS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
