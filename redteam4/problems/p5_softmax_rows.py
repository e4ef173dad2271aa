"""Row softmax, fp32, long rows (a 4 MB output)."""
import torch
import torch.nn as nn

rows = 256
cols = 4096
SHAPE_VARIANTS = [{"cols": 1536}, {"rows": 7}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
