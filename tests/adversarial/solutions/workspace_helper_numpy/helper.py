import numpy as np
import torch


def compute(x, w, b, y):
    out = np.clip(x.detach().numpy() * w.detach().numpy() + b.detach().numpy(), -1.0, 1.0)
    return torch.from_numpy(out)
