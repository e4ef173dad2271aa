"""(redteam12 p01, smaller) Rates from log-intensities, exp(log_rate) times a per-feature exposure; the problem's
own log-rates lie in [0, 60), and exp is finite in fp32 up to ~88.7."""
import torch
import torch.nn as nn

B = 16
N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.exposure = nn.Parameter(torch.rand(N) + 0.5)

    def forward(self, log_rate):
        return torch.exp(log_rate) * self.exposure


def get_inputs():
    return [torch.rand(B, N) * 60.0]


def get_init_inputs():
    return []
