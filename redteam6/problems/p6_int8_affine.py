"""int8 x int8 products in int16, arithmetic shift, saturate back to int8 (per-column weights as an input)."""
import torch
import torch.nn as nn

ROWS, COLS = 512, 1024
SHAPE_VARIANTS = [{"COLS": 1000}]


class Model(nn.Module):
    def forward(self, x, w):
        y = (x.to(torch.int16) * w.to(torch.int16)) >> 2
        return y.clamp(-128, 127).to(torch.int8)


def get_inputs():
    return [torch.randint(-128, 128, (ROWS, COLS), dtype=torch.int8),
            torch.randint(-128, 128, (COLS,), dtype=torch.int8)]


def get_init_inputs():
    return []
