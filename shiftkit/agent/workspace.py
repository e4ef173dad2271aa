"""A private, per-episode workspace directory with a read-only harness and a small writable surface.

Layout (the CUDA Agent ``agent_workdir`` contract, CPU-flavoured)::

    model.py        the reference problem           (read-only)
    SKILL.md        the backend's skill document    (read-only)
    model_new.py    the agent's ModelNew            (writable)
    kernels/*       the agent's kernel sources      (writable: .cpp .cc .c .h .hpp .cu .cuh)

Every path the agent names is resolved against the root; absolute paths, ``..`` escapes and symlinks
that leave the root raise :class:`SandboxViolation`; writes to anything but the writable surface raise
:class:`ReadOnly`. The evaluator always loads the *original* problem file, so even a tampered
``model.py`` could not change the reference.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

HARNESS_FILES = ("model.py", "SKILL.md")
WRITABLE_FILES = ("model_new.py",)
WRITABLE_DIRS = ("kernels",)
SOURCE_SUFFIXES = (".cpp", ".cc", ".c", ".h", ".hpp", ".cu", ".cuh")
MAX_FILE_BYTES = 256_000


class SandboxViolation(Exception):
    """A path outside the workspace."""


class ReadOnly(Exception):
    """A write to a harness file or outside the writable surface."""


class Workspace:
    def __init__(self, root: str | Path, problem_source: str, skill: str, own: bool = False):
        self.root = Path(root).resolve()
        self.own = own  # delete on close
        (self.root / "kernels").mkdir(parents=True, exist_ok=True)
        for name, text in (("model.py", problem_source), ("SKILL.md", skill)):
            p = self.root / name
            if p.exists():
                os.chmod(p, stat.S_IWUSR | stat.S_IRUSR)
            p.write_text(text)
            os.chmod(p, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # 0444: read-only to the agent

    @classmethod
    def create(cls, problem_source: str, skill: str, parent: str | Path | None = None) -> "Workspace":
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        d = tempfile.mkdtemp(prefix="sk-agent-ws-", dir=parent)
        return cls(d, problem_source, skill, own=True)

    def close(self) -> None:
        if self.own and self.root.exists():
            for p in self.root.rglob("*"):
                try:
                    os.chmod(p, stat.S_IRWXU)
                except OSError:
                    pass
            shutil.rmtree(self.root, ignore_errors=True)

    # ---- paths --------------------------------------------------------------------------------
    def resolve(self, rel: str) -> Path:
        """The absolute path of ``rel`` inside the workspace (raises SandboxViolation otherwise)."""
        if not isinstance(rel, str) or not rel.strip():
            raise SandboxViolation("empty path")
        rel = rel.strip()
        if rel.startswith(("/", "~")) or PurePosixPath(rel).is_absolute():
            raise SandboxViolation(f"absolute path {rel!r}: use a path relative to the workspace")
        p = (self.root / rel).resolve()
        if p != self.root and self.root not in p.parents:
            raise SandboxViolation(f"path {rel!r} leaves the workspace")
        return p

    def rel(self, p: Path) -> str:
        return str(p.relative_to(self.root)) if p != self.root else "."

    def writable(self, p: Path) -> bool:
        r = PurePosixPath(self.rel(p))
        if str(r) in WRITABLE_FILES:
            return True
        return len(r.parts) >= 2 and r.parts[0] in WRITABLE_DIRS and r.suffix in SOURCE_SUFFIXES

    # ---- operations (all raise SandboxViolation / ReadOnly / FileNotFoundError / ValueError) ----------
    def list(self, rel: str = ".") -> list[dict]:
        base = self.resolve(rel)
        if not base.is_dir():
            raise FileNotFoundError(f"no directory {rel!r}")
        out = []
        for p in sorted(base.rglob("*")):
            if p.is_file() and "build" not in p.relative_to(self.root).parts:
                out.append({"path": self.rel(p), "bytes": p.stat().st_size,
                            "mode": "rw" if self.writable(p) else "ro"})
        return out

    def read(self, rel: str) -> str:
        p = self.resolve(rel)
        if not p.is_file():
            raise FileNotFoundError(f"no file {rel!r}")
        return p.read_text(errors="replace")

    def write(self, rel: str, content: str) -> Path:
        p = self.resolve(rel)
        if not self.writable(p):
            raise ReadOnly(f"{rel!r} is not writable: write model_new.py or kernels/<name>{{{','.join(SOURCE_SUFFIXES)}}}")
        if len(content.encode()) > MAX_FILE_BYTES:
            raise ValueError(f"file too large ({len(content.encode())} bytes > {MAX_FILE_BYTES})")
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink():
            raise SandboxViolation(f"{rel!r} is a symlink")
        p.write_text(content)
        return p

    def edit(self, rel: str, old: str, new: str) -> int:
        """Replace the unique occurrence of ``old`` with ``new``; returns the line of the edit."""
        p = self.resolve(rel)
        if not self.writable(p):
            raise ReadOnly(f"{rel!r} is not writable")
        text = self.read(rel)
        n = text.count(old) if old else 0
        if n != 1:
            raise ValueError(f"old_text occurs {n} times in {rel!r}; it must occur exactly once")
        i = text.index(old)
        self.write(rel, text[:i] + new + text[i + len(old):])
        return text[:i].count("\n") + 1

    def has_solution(self) -> bool:
        return (self.root / "model_new.py").is_file()
