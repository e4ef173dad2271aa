"""Floor division and remainder of int64 tensors (Python semantics: the remainder takes the divisor's sign)."""
import torch
import torch.nn as nn

rows = 1024
cols = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        q = torch.div(a, b, rounding_mode="floor")
        return q, a - q * b


def get_inputs():
    a = torch.randint(-10**6, 10**6, (rows, cols), dtype=torch.int64)
    sign = torch.randint(0, 2, (rows, cols), dtype=torch.int64) * 2 - 1
    b = torch.randint(1, 1000, (rows, cols), dtype=torch.int64) * sign
    return [a, b]


def get_init_inputs():
    return []
