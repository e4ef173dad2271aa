"""One value per row scattered into a wide zero matrix (a one-hot times a value): the output is 16 MB and almost
all zeros, so initialising it is most of the work."""
import torch
import torch.nn as nn

n_rows = 256
n_cols = 16384
SHAPE_VARIANTS = [{"n_rows": 17}]


class Model(nn.Module):
    def __init__(self, n_cols):
        super().__init__()
        self.n_cols = n_cols

    def forward(self, idx, vals):
        out = torch.zeros(idx.shape[0], self.n_cols, dtype=vals.dtype)
        return out.scatter_(1, idx.unsqueeze(1), vals.unsqueeze(1))


def get_inputs():
    return [torch.randint(0, n_cols, (n_rows,)), torch.randn(n_rows)]


def get_init_inputs():
    return [n_cols]
