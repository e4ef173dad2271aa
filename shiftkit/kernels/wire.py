"""Framing between the trusted parent and a worker: ``len(json) | json | blob``. No pickle crosses from
worker to parent; tensors travel as ``torch.save`` bytes and the parent loads them with
``weights_only=True`` (plain tensors, containers and numbers only)."""

from __future__ import annotations

import io
import json
import struct


def pack(header: dict, blob: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<I", len(h)) + h + blob


def unpack(data: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<I", data[:4])
    return json.loads(data[4:4 + n].decode()), data[4 + n:]


def dumps_tensors(obj) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def loads_tensors_untrusted(blob: bytes):
    """Safe load (weights_only): a tensor subclass or any other object is refused with an exception."""
    import torch

    return torch.load(io.BytesIO(blob), weights_only=True)


def digest(obj) -> str:
    """sha256 over the bytes, shapes and dtypes of all tensors in a nested structure (for input-mutation checks)."""
    import hashlib

    import torch

    h = hashlib.sha256()

    def walk(x):
        if isinstance(x, torch.Tensor):
            t = x.detach().contiguous()
            h.update(f"{tuple(t.shape)}{t.dtype}".encode())
            if t.numel():
                h.update(t.view(torch.uint8).numpy().data if t.dim() else t.reshape(1).view(torch.uint8).numpy().data)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for k in sorted(x):
                walk(x[k])
        else:
            h.update(repr(x).encode())

    walk(obj)
    return h.hexdigest()
