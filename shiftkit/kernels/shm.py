"""The data path between the parent and a worker: two memory regions the parent owns.

Each worker gets an input region and an output region (``memfd``s created by the parent; no named
``/dev/shm`` object exists, so nothing can be left behind). The input region is sealed against new
writable mappings before the worker sees it: the worker can only map it read-only, so a kernel cannot work
in place on its inputs. Every round the parent writes that round's inputs while the worker is frozen, and
after the worker said "done" and was frozen again it copies the outputs out of the output region. A
*layout* (plain JSON) says where each tensor lies; non-tensor arguments travel in it as JSON values.
"""

from __future__ import annotations

import fcntl
import mmap
import os
from typing import Any

ALIGN = 64
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)  # Linux 5.1; not in every Python
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_SEAL


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def nbytes(x: Any) -> int:
    """Bytes the tensors of a nested structure need in a region (each aligned)."""
    import torch

    if isinstance(x, torch.Tensor):
        return -(-(x.numel() * x.element_size()) // ALIGN) * ALIGN
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(nbytes(v) for v in x.values())
    return 0


def layout(x: Any, off: int = 0) -> tuple[Any, int]:
    """Pure: a nested structure -> (JSON layout, bytes used). Tensors become {"t": "tensor", off, shape,
    dtype}; lists/tuples/dicts keep their kind; anything else must be a JSON value."""
    import torch

    if isinstance(x, torch.Tensor):
        n = x.numel() * x.element_size()
        return {"t": "tensor", "off": off, "shape": list(x.shape), "dtype": _dtype_name(x)}, off + -(-n // ALIGN) * ALIGN
    if isinstance(x, (list, tuple)):
        items = []
        for v in x:
            lv, off = layout(v, off)
            items.append(lv)
        return {"t": "tuple" if isinstance(x, tuple) else "list", "items": items}, off
    if isinstance(x, dict):
        items = {}
        for k in sorted(x):
            if not isinstance(k, str):
                raise TypeError(f"dict keys must be strings, got {k!r}")
            items[k], off = layout(x[k], off)
        return {"t": "dict", "items": items}, off
    if x is None or isinstance(x, (bool, int, float, str)):
        return {"t": "value", "v": x}, off
    raise TypeError(f"unsupported value of type {type(x).__name__} in problem inputs or outputs")


def leaves(lay: Any) -> list[dict]:
    """Pure: the tensor leaves of a layout in traversal order."""
    if lay["t"] == "tensor":
        return [lay]
    if lay["t"] in ("list", "tuple"):
        return [x for v in lay["items"] for x in leaves(v)]
    if lay["t"] == "dict":
        return [x for k in sorted(lay["items"]) for x in leaves(lay["items"][k])]
    return []


class Region:
    """A parent-owned memory region. ``readonly_for_worker``: sealed so the worker can map it only read-only."""

    def __init__(self, name: str, size: int, readonly_for_worker: bool):
        self.size = max(ALIGN, size)
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if readonly_for_worker else 0))
        try:
            os.ftruncate(self.fd, self.size)
            self.map = mmap.mmap(self.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            if readonly_for_worker:
                fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, SEALS)
        except BaseException:
            os.close(self.fd)
            raise

    def write(self, x: Any, lay: Any) -> None:
        """Write the tensors of ``x`` where ``lay`` (from :func:`layout`) puts them."""
        import torch

        if lay["t"] == "tensor":
            n = x.numel() * x.element_size()
            if n:
                src = x.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
                dst = torch.frombuffer(self.map, dtype=torch.uint8, count=n, offset=lay["off"])
                dst.copy_(src)
        elif lay["t"] in ("list", "tuple"):
            for v, lv in zip(x, lay["items"]):
                self.write(v, lv)
        elif lay["t"] == "dict":
            for k, lv in lay["items"].items():
                self.write(x[k], lv)

    def read(self, lay: Any, values: list | None = None) -> Any:
        """A private copy of the structure ``lay`` describes (tensors copied out of the region now).
        ``values``: the worker's JSON values for ``value`` leaves, in order (None: those of ``lay``)."""
        import torch

        vals = iter(values) if values is not None else None
        self_ = self

        def rd(lv):
            t = lv["t"]
            if t == "tensor":
                dtype = getattr(torch, lv["dtype"])
                shape = lv["shape"]
                n = 1
                for s in shape:
                    n *= s
                if n == 0:
                    return torch.empty(shape, dtype=dtype)
                raw = torch.frombuffer(self_.map, dtype=torch.uint8, count=n * torch.empty((), dtype=dtype).element_size(),
                                       offset=lv["off"]).clone()
                return raw.view(dtype).reshape(shape)
            if t in ("list", "tuple"):
                items = [rd(v) for v in lv["items"]]
                return tuple(items) if t == "tuple" else items
            if t == "dict":
                return {k: rd(v) for k, v in lv["items"].items()}
            return next(vals) if vals is not None else lv["v"]

        return rd(lay)

    def close(self) -> None:
        try:
            self.map.close()
        except (BufferError, ValueError):
            pass  # a tensor view is still alive: the mapping goes with the last reference
        try:
            os.close(self.fd)
        except OSError:
            pass
