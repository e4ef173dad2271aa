"""Torch's own code that the attribution counts as runtime, found by torch's own symbol table.

Two classes of code inside ``libtorch_cpu`` are not torch *computing the problem*:

- **Sleef**, the vector math library torch bundles (``Sleef_expf8_u10``, ...): ATen's own vector header
  (``at::vec::Vectorized<float>::exp``) calls it from an honest binding, as a lean kernel calls libm or
  libmvec, which are runtime (redteam3 hn03);
- **the fill kernel** (``at::native::(anonymous namespace)::fill_kernel`` and the loops instantiated with its
  lambda): ``torch.zeros``/``full``/``fill_`` of an output, allocation with its initialisation, which the op
  blocker already allows (redteam3 hn18: a 16 MB ``torch.zeros`` was a quarter of an honest kernel's time).

The ranges are read with ``nm`` from the installed library (its ``.symtab``; torch's wheels are not stripped),
which no candidate can change: a candidate that remaps torch's pages is judged by the attribution's mapping
checks first. Reading takes ~2 s of CPU, so the ranges are cached per library file (path, size, mtime) in
memory and on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

# whole demangled names (clones such as ``[clone .cold]`` included) and names nested in the fill kernel's lambda
_FILL = "at::native::(anonymous namespace)::fill_kernel(at::TensorIterator&, c10::Scalar const&)"
_RUNTIME_NAME = re.compile(r"Sleef_\w+|" + re.escape(_FILL) + r"(?: \[clone [.\w]+\])*")
_RUNTIME_INSIDE = re.compile(re.escape(_FILL) + r"::\{lambda")

_MEMO: dict[tuple, list[tuple[int, int]]] = {}


def runtime_symbol(name: str) -> bool:
    """Pure: a demangled symbol of torch's library that counts as runtime (see the module docstring)."""
    return bool(_RUNTIME_NAME.fullmatch(name) or _RUNTIME_INSIDE.search(name))


def ranges_from_nm(text: str) -> list[tuple[int, int]]:
    """Pure: sorted, merged ``[lo, hi)`` virtual-address ranges of the runtime functions in ``nm -C -S
    --defined-only`` output (lines ``value size type name``; text symbols only)."""
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in ("t", "T", "W", "w", "i"):
            continue
        try:
            lo, size = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        if size and runtime_symbol(parts[3]):
            out.append((lo, lo + size))
    out.sort()
    merged: list[tuple[int, int]] = []
    for lo, hi in out:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shiftkit" / "torchsyms"


def runtime_ranges(path: str) -> list[tuple[int, int]]:
    """The runtime ranges (virtual addresses relative to the library's load base) of torch library ``path``."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key in _MEMO:
        return _MEMO[key]
    f = _cache_dir() / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".json")
    try:
        ranges = [tuple(r) for r in json.loads(f.read_text())]
    except (OSError, ValueError):
        p = subprocess.run(["nm", "-C", "-S", "--defined-only", path], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise OSError(f"nm {path} failed: {p.stderr.strip()[:200]}")
        ranges = ranges_from_nm(p.stdout)
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=f.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(ranges, fh)
            os.replace(tmp, f)
        except OSError:
            pass  # an unwritable cache only costs the next process the read
    _MEMO[key] = ranges
    return ranges
