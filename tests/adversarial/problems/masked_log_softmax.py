"""(redteam10 p04, smaller) Masked log-softmax over the last dim (attention-score style): masked-out positions are -inf in the output,
as torch gives them. Every row keeps at least one position (column 0), so no row is NaN."""
import torch
import torch.nn as nn

N = 128
D = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, mask):
        s = scores.masked_fill(~mask, float("-inf"))
        return torch.log_softmax(s, dim=-1)


def get_inputs():
    scores = torch.randn(N, D) * 2.0
    mask = torch.rand(N, D) < 0.7
    mask[:, 0] = True
    return [scores, mask]


def get_init_inputs():
    return []
