"""Build kernel sources into a content-hash-keyed cache, inside the sandbox.

``build(spec)`` checks the candidate's flags against an allowlist (:func:`static.disallowed_flags`), writes
the sources into ``<cache>/builds/<key>/work/src`` and runs the compiler and the linker as argv lists
(never a shell string; torch's include and link flags from ``torch.utils.cpp_extension``) in one jailed
process tree (``jail.py`` as a script: user/mount/network/PID namespaces, the file system read-only except
``work/``, scrubbed environment, rlimits on CPU, memory, file size and open files, a cgroup with a process
cap, the whole tree killed on timeout). The key hashes the sources, flags, backend, torch and compiler
versions and the machine, so rebuilding unchanged sources is a cache hit (successes *and* failures are
cached). The parent records the artefact's sha256 in ``result.json`` (outside the sandbox's writable
view) and verifies it on every cache hit and before loading. Nothing is imported here: the trusted parent
never loads candidate code. Compile errors come back as structured :class:`CompileError` records (file,
line, message) with file names relative to the solution (``cpp_sources`` for load_inline strings).
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
    sha256: str | None = None

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
    return f"torch={torch.__version__}|cc={cc}|machine={machine_id()}|v=3"


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


def _compile_plan(spec: BuildSpec, units: list[str], src_dir: Path, work: Path, modname: str) -> tuple[list[list[str]], str]:
    """argv lists (compile each unit, then link) and the artefact path. Lean ``c`` specs get no torch
    include or link flags (nothing to resolve vendor BLAS symbols against); ``torch`` specs get torch's."""
    import sysconfig

    import torch.utils.cpp_extension as ce

    backend = get_backend(spec.backend)
    incs = ["-I" + str(src_dir)] + ["-I" + d for d in sorted({str(Path(u).parent) for u in units}) if d != str(src_dir)]
    common = []
    if spec.kind == "torch":
        common = [f"-DTORCH_EXTENSION_NAME={modname}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
        for d in ce.include_paths() + [sysconfig.get_path("include", scheme="posix_prefix")]:
            common += ["-isystem", d]
    cflags = common + incs + ["-fPIC", "-std=c++20" if spec.kind == "torch" else "-std=c++17"] + list(backend.cflags) + list(spec.extra_cflags)
    ldflags = list(backend.ldflags) + list(spec.extra_ldflags)
    if spec.kind == "torch":
        ldflags += ce._prepare_ldflags([], spec.backend == "cuda", False, False, False)
    argvs, objs = [], []
    for i, u in enumerate(units):
        obj = str(work / f"unit{i}.o")
        if u.endswith(".cu"):
            nvcc = os.path.join(getattr(ce, "CUDA_HOME", None) or "/usr/local/cuda", "bin", "nvcc")
            argvs.append([nvcc, "-c", u, "-o", obj, "--compiler-options", "-fPIC", *common, *incs,
                          *ce.COMMON_NVCC_FLAGS, *backend.cuda_cflags, *spec.extra_cuda_cflags])
        else:
            argvs.append(["c++", "-c", u, "-o", obj, *cflags])
        objs.append(obj)
    so = str(work / f"{modname}.so")
    argvs.append(["c++", *objs, "-shared", *ldflags, "-o", so])
    return argvs, so


BLAS_SYMBOL_RE = re.compile(r"^(?:[sdcz](?:gemm|gemv|ger|axpy|dot|dotc|dotu|scal|copy|swap|nrm2|asum|trsm|trmm|symm|syrk|syr2k|"
                            r"hemm|herk|gemm3m|gesv|getrf|getrs|potrf|syev|gesdd|gels)_?|i[sdcz]amax_?|cblas_\w+|mkl_\w+|MKL_\w+|"
                            r"dnnl_\w+|mkldnn_\w+|openblas_\w+|lapacke?_\w+|LAPACKE_\w+|cublas\w+|cudnn\w+|cublasLt\w+)$")


def vendor_symbols(nm_output: str) -> list[str]:
    """Pure: undefined dynamic symbols (``nm -D --undefined-only`` lines) that name vendor BLAS/LAPACK/MKL/
    oneDNN/cuBLAS/cuDNN entry points."""
    out = []
    for line in nm_output.splitlines():
        parts = line.split()
        if parts:
            name = parts[-1].split("@")[0]
            if BLAS_SYMBOL_RE.match(name):
                out.append(name)
    return sorted(set(out))


def build(spec: BuildSpec, cache_dir: str | Path | None = None, timeout_s: float = 300.0, jobs: int = 2,
          isolate: bool = True, mem_mb: int = 8192) -> BuildResult:
    """Compile ``spec`` in the sandbox (or return the verified cached result for identical content).
    ``isolate=False`` (only with ``allow_unisolated``) runs the same argv lists without namespaces."""
    import torch.utils.cpp_extension as ce

    from shiftkit.kernels.runtime import file_sha256
    from shiftkit.kernels.static import disallowed_flags

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
            r = BuildResult(**d)
            if not r.ok or (r.so_path and Path(r.so_path).is_file() and file_sha256(r.so_path) == r.sha256):
                return r
            done.unlink()  # the artefact changed since it was built: never load it, rebuild
        t0 = time.perf_counter()
        work = bdir / "work"
        if work.exists():
            shutil.rmtree(work)
        src_dir = work / "src"
        units = materialize(spec, src_dir)
        errors: list[CompileError] = []
        log = ""
        so = None
        bad = disallowed_flags(spec.extra_cflags, spec.extra_cuda_cflags, spec.extra_ldflags)
        if bad:
            errors = [CompileError(None, None, f"build flag {b!r} is not on the allowlist") for b in bad]
        elif not units:
            errors = [CompileError(None, None, "no translation units (.cpp/.cu) in the sources")]
        elif spec.backend == "cuda" and not getattr(ce, "CUDA_HOME", None):
            errors = [CompileError(None, None, "CUDA backend requested but CUDA_HOME/nvcc not found")]
        else:
            argvs, so = _compile_plan(spec, units, src_dir, work, modname)
            argvs.append(["nm", "-D", "--undefined-only", so])  # vendor-BLAS check on the linked artefact
            rc, log, timed_out = run_jailed(argvs, work, timeout_s, isolate=isolate, mem_mb=mem_mb,
                                            marks={len(argvs) - 1: "@@NM@@"})
            if timed_out:
                errors = [CompileError(None, None, f"compile timed out after {timeout_s:.0f} s")]
            elif rc == 97:
                errors = [CompileError(None, None, "build sandbox unavailable: " + log.strip().splitlines()[-1][:300])]
            elif rc != 0 or not Path(so).is_file():
                errors = parse_compiler_output(_nvcc_output_fixup(log), str(src_dir))
            else:
                vs = vendor_symbols(log.split("@@NM@@", 1)[-1])
                if vs:
                    errors = [CompileError(None, None, "calls vendor library symbols (vendor BLAS is a fallback): " + ", ".join(vs[:8]))]
        ok = not errors
        res = BuildResult(ok=ok, key=key, name=spec.name, kind=spec.kind, so_path=so if ok else None,
                          errors=errors, cached=False, seconds=time.perf_counter() - t0, log_tail=log[-4000:],
                          sha256=file_sha256(so) if ok else None)
        if any("timed out" in e.message or "sandbox unavailable" in e.message for e in errors):
            return res  # transient: never cache a timeout
        tmp = bdir / "result.json.tmp"
        tmp.write_text(json.dumps({k: v for k, v in res.to_dict().items() if k not in ("cached",)}))
        os.replace(tmp, done)
        return res


def run_jailed(argvs: list[list[str]], work: Path, timeout_s: float, isolate: bool = True,
               mem_mb: int = 8192, max_log: int = 8 << 20, marks: dict | None = None) -> tuple[int, str, bool]:
    """Run argv lists one after the other (stop at the first failure) in one sandbox whose only writable
    dir is ``work``. Returns (exit code, combined output, timed out). Output goes to ``work/build.log``
    (capped by RLIMIT_FSIZE); the whole tree is killed on timeout (cgroup, PDEATHSIG chain, PID namespace)."""
    import sys

    from shiftkit.kernels import jail

    work = Path(work).resolve()
    logp = work / "build.log"
    group = jail.make_group("skb", pids_max=256) if isolate else None
    spec = {"argvs": argvs, "cwd": str(work), "rw": [str(work)], "ro": jail.runtime_paths(),  # torch headers, libs
            "env": jail.scrub_env(), "log": str(logp),
            "limits": {"cpu_s": int(timeout_s) + 5, "as_bytes": mem_mb << 20, "fsize_bytes": 1 << 30, "nofile": 1024},
            "cgroup_procs": [os.path.join(d, "cgroup.procs") for d in group.dirs.values()] if group else [],
            "isolate": isolate, "marks": {str(k): v for k, v in (marks or {}).items()}}
    env = jail.scrub_env()
    proc = subprocess.Popen([sys.executable, "-I", str(Path(jail.__file__)), json.dumps(spec)], cwd=str(work),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        if group is not None:
            group.kill(spare=proc.pid)  # the launcher reaps its child and exits: no orphan
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        _, err = proc.communicate()
    finally:
        if group is not None:
            group.close()
    try:
        with open(logp, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - max_log))
            log = f.read().decode(errors="replace")
    except OSError:
        log = ""
    return proc.returncode, (err or b"").decode(errors="replace")[-4000:] + log, timed_out
