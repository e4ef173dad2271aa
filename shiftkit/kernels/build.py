"""Build kernel sources with torch.utils.cpp_extension into a content-hash-keyed cache.

``build(spec)`` writes the sources into ``<cache>/builds/<key>/src``, emits torch's ninja file and runs
ninja with a timeout. The key hashes the sources, flags, backend, torch and compiler versions and the
machine, so rebuilding unchanged sources is a cache hit (successes *and* failures are cached). Nothing
is imported here: the trusted parent never loads candidate code. Compile errors come back as
structured :class:`CompileError` records (file, line, message) with file names relative to the
solution (``cpp_sources`` for load_inline strings).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from shiftkit.kernels.backends import get_backend, machine_id
from shiftkit.kernels.solution import BuildSpec


def default_cache_dir() -> Path:
    return Path(os.environ.get("SHIFTKIT_KERNEL_CACHE", ".cache/kernels")).resolve()


@dataclass
class CompileError:
    file: str | None
    line: int | None
    message: str
    column: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class BuildResult:
    ok: bool
    key: str
    name: str
    kind: str
    so_path: str | None
    errors: list[CompileError] = field(default_factory=list)
    cached: bool = False
    seconds: float = 0.0
    log_tail: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["errors"] = [e.to_dict() for e in self.errors]
        return d


@functools.lru_cache(maxsize=1)
def _toolchain_salt() -> str:
    import torch

    try:
        cc = subprocess.run(["c++", "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except Exception:  # noqa: BLE001
        cc = "unknown"
    return f"torch={torch.__version__}|cc={cc}|machine={machine_id()}|v=2"


_ERR_RE = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal\s+)?error:\s*(?P<msg>.*)$", re.M)
_LINK_RE = re.compile(r"(undefined reference to .*|ld returned \d+ exit status|cannot find -l\S+)")


def parse_compiler_output(text: str, src_root: str | None = None) -> list[CompileError]:
    """Pure: ``file:line:col: error: msg`` lines (gcc/clang/nvcc) -> CompileError records."""
    out: list[CompileError] = []
    for m in _ERR_RE.finditer(text):
        f = m.group("file").strip()
        if src_root and f.startswith(src_root):
            f = f[len(src_root):].lstrip("/")
        out.append(CompileError(f, int(m.group("line")), m.group("msg").strip(), int(m.group("col")) if m.group("col") else None))
    if not out:
        for m in _LINK_RE.finditer(text):
            out.append(CompileError(None, None, m.group(1).strip()))
    if not out and text.strip():
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-3:]
        out.append(CompileError(None, None, " | ".join(tail)[:500]))
    return out


def _nvcc_output_fixup(text: str) -> str:
    # nvcc reports "file(line): error: msg"
    return re.sub(r"^([^\s(]+)\((\d+)\):\s*error", r"\1:\2: error", text, flags=re.M)


def _pybind_glue(functions: list[str]) -> str:
    defs = "\n".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in functions)
    return f'\n#line 1 "<pybind glue>"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n'


def materialize(spec: BuildSpec, src_dir: Path) -> list[str]:
    """Write the spec's files; return the translation units to compile."""
    src_dir.mkdir(parents=True, exist_ok=True)
    units = []
    for rel, text in spec.sources.items():
        if spec.kind == "torch" and rel == "cpp_sources.cpp":
            text = '#include <torch/extension.h>\n#line 1 "cpp_sources"\n' + text
            if spec.functions:
                text += _pybind_glue(spec.functions)
        elif spec.kind == "torch" and rel == "cuda_sources.cu":
            text = '#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#line 1 "cuda_sources"\n' + text
        p = src_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if p.suffix in (".cpp", ".cc", ".cxx", ".c", ".cu"):
            units.append(str(p))
    return units


def build(spec: BuildSpec, cache_dir: str | Path | None = None, timeout_s: float = 300.0, jobs: int = 2) -> BuildResult:
    """Compile ``spec`` (or return the cached result for identical content)."""
    import torch.utils.cpp_extension as ce

    backend = get_backend(spec.backend)
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    key = spec.key(_toolchain_salt() + "|" + json.dumps(list(backend.cflags) + list(backend.cuda_cflags)))
    bdir = cache / "builds" / key
    bdir.mkdir(parents=True, exist_ok=True)
    modname = f"sk_{key}"
    with open(bdir / ".lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        done = bdir / "result.json"
        if done.is_file():
            d = json.loads(done.read_text())
            d["errors"] = [CompileError(**e) for e in d["errors"]]
            d["cached"] = True
            d["seconds"] = 0.0
            return BuildResult(**d)
        t0 = time.perf_counter()
        src_dir = bdir / "src"
        if src_dir.exists():
            shutil.rmtree(src_dir)
        units = materialize(spec, src_dir)
        with_cuda = spec.backend == "cuda"
        incs = [str(src_dir)] + sorted({str(Path(u).parent) for u in units})
        cflags = list(backend.cflags) + list(spec.extra_cflags)
        cuda_cflags = list(backend.cuda_cflags) + list(spec.extra_cuda_cflags)
        ldflags = ce._prepare_ldflags(list(backend.ldflags) + list(spec.extra_ldflags), with_cuda, False, False, False)
        errors: list[CompileError] = []
        log = ""
        so = bdir / f"{modname}.so"
        if not units:
            errors = [CompileError(None, None, "no translation units (.cpp/.cu) in the sources")]
        elif with_cuda and not getattr(ce, "CUDA_HOME", None):
            errors = [CompileError(None, None, "CUDA backend requested but CUDA_HOME/nvcc not found")]
        else:
            ce._write_ninja_file_to_build_library(
                path=str(bdir / "build.ninja"), name=modname, sources=units, extra_cflags=cflags,
                extra_cuda_cflags=cuda_cflags, extra_sycl_cflags=[], extra_ldflags=ldflags,
                extra_include_paths=incs, with_cuda=with_cuda, with_sycl=False, is_standalone=False)
            env = dict(os.environ)
            try:
                r = subprocess.run(["ninja", "-j", str(max(1, jobs))], cwd=bdir, capture_output=True, text=True,
                                   timeout=timeout_s, env=env)
                log = r.stdout + r.stderr
                if r.returncode != 0 or not so.is_file():
                    errors = parse_compiler_output(_nvcc_output_fixup(log), str(src_dir))
            except subprocess.TimeoutExpired:
                errors = [CompileError(None, None, f"compile timed out after {timeout_s:.0f} s")]
        res = BuildResult(ok=not errors, key=key, name=spec.name, kind=spec.kind, so_path=str(so) if not errors else None,
                          errors=errors, cached=False, seconds=time.perf_counter() - t0, log_tail=log[-4000:])
        if any("timed out" in e.message for e in errors):
            return res  # transient: never cache a timeout
        tmp = bdir / "result.json.tmp"
        tmp.write_text(json.dumps({k: v for k, v in res.to_dict().items() if k not in ("cached",)}))
        os.replace(tmp, done)
        return res
