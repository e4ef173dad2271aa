"""EmbeddingBag (mode="sum") with explicit offsets: int64 indices and offsets in, fp32 weights (a parameter)."""
import torch
import torch.nn as nn

num_embeddings = 20000
dim = 64
bags = 512
bag_len = 32
SHAPE_VARIANTS = [{"bags": 100}]


class Model(nn.Module):
    def __init__(self, num_embeddings, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, dim, mode="sum")

    def forward(self, indices, offsets):
        return self.bag(indices, offsets)


def get_inputs():
    indices = torch.randint(0, num_embeddings, (bags * bag_len,), dtype=torch.int64)
    offsets = torch.arange(0, bags * bag_len, bag_len, dtype=torch.int64)
    return [indices, offsets]


def get_init_inputs():
    return [num_embeddings, dim]
