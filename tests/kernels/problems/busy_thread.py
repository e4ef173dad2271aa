"""Hand-written: y = x + 1, and a thread that spins forever from the moment the model is built (stands in
for any work a worker would do outside its rounds). It starts in ``Model.__init__``, which only the worker runs:
the parent imports this file too (load_problem), and a spinning thread there would hold the GIL of the test
process for the rest of the session."""

import threading

import torch
import torch.nn as nn


def _spin():
    x = 0
    while True:
        x += 1


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        threading.Thread(target=_spin, name="busy_thread_spin", daemon=True).start()

    def forward(self, x):
        return x + 1.0


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
