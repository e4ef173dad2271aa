# Problem: integer polynomial modulo a prime, int64 in and out (no floating tensor anywhere).
import torch
import torch.nn as nn

N = 1 << 20
HI = 1 << 15
P = 1000003


class Model(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return (x * x + 7 * x + 3) % self.p


def get_inputs():
    return [torch.randint(0, HI, (N,), dtype=torch.int64)]


def get_init_inputs():
    return [P]
