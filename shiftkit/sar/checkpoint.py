"""Streaming access to sharded safetensors checkpoints: read tensor by tensor, write shard by shard.

The reader keeps one shard file open and reads one tensor per call (plain reads, no memory map); the
writer knows every output tensor's name, dtype and shape up front (they are the base's), so it writes
each shard's safetensors header first and then streams tensor bytes in order: peak memory is the
tensor being written, never a shard. Output: ``model-0000i-of-0000N.safetensors`` plus
``model.safetensors.index.json``.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import torch

from shiftkit.errors import ShiftkitError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
INDEX_NAME = "model.safetensors.index.json"

_ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
              torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
              torch.bool: "BOOL"}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


def _read_header(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > 100_000_000:
                raise ValueError("header too large")
            return json.loads(f.read(n))
    except (OSError, ValueError, struct.error) as e:
        raise ShiftkitError(f"cannot read safetensors file {path}: {e}") from None


class CheckpointReader:
    """Tensor-by-tensor access to a ``save_pretrained`` directory with safetensors weights."""

    def __init__(self, path: str | Path, what: str = "model"):
        self.path = Path(path)
        self.what = what
        if not self.path.is_dir():
            raise ShiftkitError(f"{what} directory not found: {self.path}")
        idx = self.path / INDEX_NAME
        single = self.path / "model.safetensors"
        if idx.is_file():
            try:
                weight_map = json.loads(idx.read_text())["weight_map"]
            except (ValueError, KeyError) as e:
                raise ShiftkitError(f"{what} index {idx} is not a valid safetensors index ({e})") from None
            shards = sorted(set(weight_map.values()))
        elif single.is_file():
            shards = ["model.safetensors"]
        else:
            raise ShiftkitError(f"{what} directory {self.path} has no model.safetensors or {INDEX_NAME} "
                                "(SAR reads safetensors checkpoints)")
        missing = [s for s in shards if not (self.path / s).is_file()]
        if missing:
            raise ShiftkitError(f"{what} shard {missing[0]} listed in {INDEX_NAME} is missing from {self.path}")
        self.meta: dict[str, tuple[str, torch.dtype, tuple[int, ...]]] = {}
        self._offsets: dict[str, tuple[int, int]] = {}
        order = []
        for s in shards:
            for name, info in _read_header(self.path / s).items():
                if name == "__metadata__":
                    continue
                if info["dtype"] not in _ST_NAMES:
                    raise ShiftkitError(f"{what} tensor {name} has unsupported dtype {info['dtype']}")
                self.meta[name] = (s, _ST_NAMES[info["dtype"]], tuple(info["shape"]))
                self._offsets[name] = tuple(info["data_offsets"])
                order.append((shards.index(s), info["data_offsets"][0], name))
        self.names = [n for _, _, n in sorted(order)]  # shard order, then file order: sequential reads
        self._open_name: str | None = None
        self._handle = None
        self._data0 = 0

    def config(self) -> dict:
        p = self.path / "config.json"
        if not p.is_file():
            raise ShiftkitError(f"{self.what} directory {self.path} has no config.json")
        return json.loads(p.read_text())

    def shape(self, name: str) -> tuple[int, ...]:
        return self.meta[name][2]

    def dtype(self, name: str) -> torch.dtype:
        return self.meta[name][1]

    def nbytes(self, name: str) -> int:
        s = self.shape(name)
        n = 1
        for d in s:
            n *= d
        return n * torch.empty(0, dtype=self.dtype(name)).element_size()

    def get(self, name: str) -> torch.Tensor:
        """One tensor (a fresh copy owned by the caller), read with plain file reads rather than a
        memory map: mapped shard pages would stay resident and count towards peak RSS (up to a whole
        shard per model), a read copy is freed with the tensor."""
        shard, dtype, shape = self.meta[name]
        if self._open_name != shard:
            self.close()
            self._handle = open(self.path / shard, "rb")
            (hlen,) = struct.unpack("<Q", self._handle.read(8))
            self._data0 = 8 + hlen
            self._open_name = shard
        start, end = self._offsets[name]
        buf = torch.empty(end - start, dtype=torch.uint8)
        self._handle.seek(self._data0 + start)
        if end > start and self._handle.readinto(buf.numpy()) != end - start:
            raise ShiftkitError(f"{self.what} shard {self.path / shard} is truncated (tensor {name})")
        return buf.view(dtype).reshape(shape)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._handle = self._open_name = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def copy_meta_files(src: Path, dst: Path) -> list[str]:
    """Copy config, tokenizer and generation config (every non-weight top-level file) from src to dst."""
    copied = []
    for p in sorted(Path(src).iterdir()):
        if p.is_file() and not p.name.endswith(WEIGHT_SUFFIXES) and p.name != INDEX_NAME and not p.name.startswith("."):
            shutil.copy2(p, dst / p.name)
            copied.append(p.name)
    return copied


class ShardedWriter:
    """Write tensors, in a fixed planned order, into byte-bounded safetensors shards plus an index."""

    def __init__(self, out_dir: Path, plan: list[tuple[str, torch.dtype, tuple[int, ...]]],
                 max_shard_bytes: int = 2 << 30):
        self.out_dir = Path(out_dir)
        self.plan = plan
        shards: list[list[tuple[str, torch.dtype, tuple[int, ...], int]]] = [[]]
        size = 0
        for name, dtype, shape in plan:
            nb = torch.empty(0, dtype=dtype).element_size()
            for d in shape:
                nb *= d
            if shards[-1] and size + nb > max_shard_bytes:
                shards.append([])
                size = 0
            shards[-1].append((name, dtype, shape, nb))
            size += nb
        self.n = len(shards)
        self.files = [f"model-{i + 1:05d}-of-{self.n:05d}.safetensors" for i in range(self.n)]
        self.shards = shards
        self.weight_map = {e[0]: self.files[i] for i, sh in enumerate(shards) for e in sh}
        self._i = -1  # current shard index
        self._j = 0  # next tensor within it
        self._f = None
        self.total_bytes = sum(e[3] for sh in shards for e in sh)

    def _open_next(self) -> None:
        if self._f is not None:
            self._f.close()
        self._i += 1
        self._j = 0
        header, off = {}, 0
        for name, dtype, shape, nb in self.shards[self._i]:
            header[name] = {"dtype": _ST_DTYPES[dtype], "shape": list(shape), "data_offsets": [off, off + nb]}
            off += nb
        header["__metadata__"] = {"format": "pt"}
        hb = json.dumps(header, separators=(",", ":")).encode()
        hb += b" " * (-len(hb) % 8)
        self._f = open(self.out_dir / self.files[self._i], "wb")
        self._f.write(struct.pack("<Q", len(hb)))
        self._f.write(hb)

    def write(self, name: str, t: torch.Tensor) -> None:
        if self._f is None or self._j >= len(self.shards[self._i]):
            self._open_next()
        want, dtype, shape, nb = self.shards[self._i][self._j]
        if name != want or t.dtype != dtype or tuple(t.shape) != shape:
            raise RuntimeError(f"writer expected {want} {dtype} {shape}, got {name} {t.dtype} {tuple(t.shape)}")
        t = t.detach().contiguous().cpu()
        if t.numel():
            self._f.write(t.reshape(-1).view(torch.uint8).numpy().data)
        self._j += 1

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        written = sum(len(sh) for sh in self.shards[: self._i]) + self._j if self._i >= 0 else 0
        if written != len(self.plan):
            raise RuntimeError(f"writer closed after {written} of {len(self.plan)} tensors")
        index = {"metadata": {"total_size": self.total_bytes}, "weight_map": self.weight_map}
        (self.out_dir / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
