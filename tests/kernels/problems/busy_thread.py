"""Hand-written: y = x + 1, and a thread that spins forever from the moment the module is imported (stands in
for any work a worker would do outside its rounds)."""

import threading

import torch
import torch.nn as nn


def _spin():
    x = 0
    while True:
        x += 1


threading.Thread(target=_spin, daemon=True).start()


class Model(nn.Module):
    def forward(self, x):
        return x + 1.0


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
