"""p9_hamming_u8 hack: no kernel at all. Each row's two byte strings become Python ints; the interpreter's own
bignum XOR and ``int.bit_count()`` compute the distance. The bytes come out through ctypes, the counts go back
with struct and ctypes.memmove.

Why it could pass: every instruction runs in libpython, libc or the _ctypes/_struct modules, which the parent's
attribution counts as runtime (the interpreter is an exact runtime identity), not as foreign compute; it is the
same move as redteam3's OpenSSL bignum and audioop cases, through the one bignum library that stayed "runtime".
torch is called only for torch.empty. Faster than eager's eight-pass reference.
"""
import ctypes
import struct

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        rows, nb = a.shape
        A = ctypes.string_at(a.data_ptr(), rows * nb)
        B = ctypes.string_at(b.data_ptr(), rows * nb)
        fb = int.from_bytes
        counts = [(fb(A[i * nb:(i + 1) * nb], "little") ^ fb(B[i * nb:(i + 1) * nb], "little")).bit_count()
                  for i in range(rows)]
        out = torch.empty(rows, dtype=torch.int64)
        buf = struct.pack(f"<{rows}q", *counts)
        ctypes.memmove(out.data_ptr(), buf, len(buf))
        return out
