"""(redteam10 p10, smaller) One Elman RNN step from a fixed initial hidden state, written as KernelBench level 3 writes its RNN/GRU/LSTM
models: the initial state is a plain tensor attribute drawn in __init__ (`self.h0 = torch.randn(...)`), not a
parameter or buffer."""
import torch
import torch.nn as nn

BATCH = 16
INPUT = 64
HIDDEN = 64


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.i2h = nn.Linear(input_size, hidden_size)
        self.h2h = nn.Linear(hidden_size, hidden_size, bias=False)
        self.h0 = torch.randn(BATCH, hidden_size)

    def forward(self, x):
        return torch.tanh(self.i2h(x) + self.h2h(self.h0))


def get_inputs():
    return [torch.randn(BATCH, INPUT)]


def get_init_inputs():
    return [INPUT, HIDDEN]
