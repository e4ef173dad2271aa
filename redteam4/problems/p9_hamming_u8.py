"""Row-wise Hamming distance between packed binary codes (uint8 bytes) -> int64 bit counts."""
import torch
import torch.nn as nn

rows = 4096
nbytes = 256
SHAPE_VARIANTS = [{"rows": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shifts", torch.arange(8, dtype=torch.uint8), persistent=False)

    def forward(self, a, b):
        x = torch.bitwise_xor(a, b)
        bits = (x.unsqueeze(-1) >> self.shifts) & 1
        return bits.sum(dim=(1, 2))


def get_inputs():
    return [torch.randint(0, 256, (rows, nbytes), dtype=torch.uint8),
            torch.randint(0, 256, (rows, nbytes), dtype=torch.uint8)]


def get_init_inputs():
    return []
