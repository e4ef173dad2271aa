"""Atomic file output, JSONL logs and run directories.

Nothing we write is ever seen half-written: files go to a temp name in the same directory and are
renamed into place; directories (checkpoints, edited models) are built under a temp name and renamed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from shiftkit.errors import ShiftkitError


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if hasattr(x, "item") and callable(x.item):  # numpy / torch scalars
        try:
            return _jsonable(x.item())
        except Exception:  # noqa: BLE001
            pass
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    return x


def dumps(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(_jsonable(obj), indent=indent, sort_keys=False)


def ensure_writable_dir(path: str | Path) -> Path:
    """Create ``path`` (and parents) or raise a one-line error if that is impossible."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ShiftkitError(f"cannot create output directory {p}: {e.strerror}") from None
    if not os.access(p, os.W_OK):
        raise ShiftkitError(f"output directory {p} is not writable")
    return p


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    p = Path(path)
    ensure_writable_dir(p.parent)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, dumps(obj) + "\n")


def follow_umask(root: Path) -> None:
    """Give every file and directory under ``root`` the permissions a plain ``open``/``mkdir`` would
    (``0666``, or ``0777`` for directories and executables, less the umask): safetensors 0.8 writes its
    files 0600, so a model saved by ``save_pretrained`` was unreadable to the others that read the rest."""
    mask = _umask()
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o777 & ~mask)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                executable = os.stat(p).st_mode & 0o111
                os.chmod(p, (0o777 if executable else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_dir(path: str | Path, overwrite: bool = True) -> Iterator[Path]:
    """Yield a temp directory beside ``path``; on success it replaces ``path`` in one rename.

    On any exception the temp directory is removed and ``path`` is left as it was.
    """
    dst = Path(path)
    ensure_writable_dir(dst.parent)
    if dst.exists() and not overwrite:
        raise ShiftkitError(f"output {dst} already exists (remove it or pass overwrite)")
    tmp = Path(tempfile.mkdtemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
    try:
        yield tmp
        follow_umask(tmp)
        if dst.exists():
            old = dst.with_name(f".{dst.name}.old-{os.getpid()}")
            os.replace(dst, old)
            os.replace(tmp, dst)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class JsonlWriter:
    """Append one flat JSON dict per line; each line is flushed so a killed run keeps its log."""

    def __init__(self, path: str | Path, append: bool = True):
        self.path = Path(path)
        ensure_writable_dir(self.path.parent)
        self._f = open(self.path, "a" if append else "w")

    def write(self, row: dict[str, Any]) -> None:
        self._f.write(json.dumps(_jsonable(row)) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise ShiftkitError(f"file not found: {p}")
    rows = []
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise ShiftkitError(f"{p}:{i}: not valid JSON") from None
    return rows


def truncate_jsonl(path: str | Path, keep: Any) -> None:
    """Rewrite a JSONL file keeping only rows for which ``keep(row)`` is true (used on resume)."""
    p = Path(path)
    if not p.is_file():
        return
    rows = [r for r in read_jsonl(p) if keep(r)]
    atomic_write_text(p, "".join(json.dumps(r) + "\n" for r in rows))


# ---- progress on a terminal and in a log ----

class LineProgress:
    """A progress bar for non-terminals: one log line every ``total // 20`` units or 30 s, no carriage returns."""

    def __init__(self, total: int, initial: int, desc: str, stream=None, unit: str = "step"):
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self.every = max(1, total // 20)
        self.stream = stream or sys.stderr
        self.postfix: dict = {}
        self.t0 = self.t_last = time.time()

    def update(self, n: int = 1) -> None:
        mark = self.n // self.every
        self.n += n
        now = time.time()
        if self.n // self.every > mark or self.n >= self.total or now - self.t_last > 30:
            self.t_last = now
            extra = " ".join(f"{k}={v}" for k, v in self.postfix.items())
            print(f"{self.desc}: {self.unit} {self.n}/{self.total} ({now - self.t0:.0f}s) {extra}".rstrip(),
                  file=self.stream, flush=True)

    def set_postfix(self, **kw) -> None:
        self.postfix = kw

    def close(self) -> None:
        pass


def progress_bar(total: int, initial: int, desc: str, stream=None, unit: str = "step"):
    """tqdm on a terminal, :class:`LineProgress` otherwise (a redirected log stays line-based)."""
    stream = stream or sys.stderr
    if getattr(stream, "isatty", lambda: False)():
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, leave=False, file=stream, unit=unit)
    return LineProgress(total, initial, desc, stream, unit)


def progress_iter(items: Iterable, desc: str, unit: str, total: int | None = None, stream=None) -> Iterator:
    """Yield ``items`` while a :func:`progress_bar` counts them (a tqdm bar on a terminal, lines in a log)."""
    total = len(items) if total is None else total  # type: ignore[arg-type]
    bar = progress_bar(total, 0, desc, stream, unit)
    try:
        for x in items:
            yield x
            bar.update(1)
    finally:
        bar.close()
