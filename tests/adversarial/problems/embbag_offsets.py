"""Hand-written: EmbeddingBag (sum) with explicit int64 offsets; the problem's own bags are all the same length."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum")

    def forward(self, indices, offsets):
        return self.bag(indices, offsets)


num_embeddings = 1000
dim = 16
bags = 64
bag_len = 8


def get_inputs():
    indices = torch.randint(0, num_embeddings, (bags * bag_len,), dtype=torch.int64)
    return [indices, torch.arange(0, bags * bag_len, bag_len, dtype=torch.int64)]


def get_init_inputs():
    return [num_embeddings, dim]
