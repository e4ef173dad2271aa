"""Build kernel sources in a bubblewrap sandbox into a content-addressed, size-capped cache.

``build(spec)`` checks the candidate's flags against the allowlist, writes the sources into
``<cache>/builds/<key>/src`` and runs the compiler and the linker (argv lists, never a shell) in one
sandbox per build (:func:`sandbox.bwrap_argv`): the OS toolchain, the Python headers and torch read-only,
the sources read-only on ``/src``, object files in a private size-capped tmpfs (the build's disk quota:
nothing of it outlives the build), the artefact alone copied to ``/out``; no network, no other file of the
host (no cache, no other solution, no ``/etc`` beyond the loader's), rlimits on CPU, memory, file size and
open files, the whole tree killed at the deadline. The artefact is then read by the analysis subprocess:
its imports go through the allowlist (:mod:`symbols`), its ``extern "C"`` prototypes come from its debug
information. The key hashes sources, flags, backend, toolchain and machine: identical sources are a
cache hit (successes and failures; never timeouts) once the artefact's sha256 is verified. The cache is
pruned to ``max_cache_bytes`` (oldest first). Compile errors are structured (:class:`CompileError`),
with solution-relative file names; only the compiler's messages about the solution's own files return.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from shiftkit.kernels.backends import get_backend, machine_id
from shiftkit.kernels.specs import BuildSpec

MAX_ARTEFACT_BYTES = 256 << 20
MAX_LOG_BYTES = 4 << 20
BUILD_TMP_BYTES = 1 << 30
DEFAULT_CACHE_CAP = 4 << 30
_RUNNER = r"""
import json, os, resource, shutil, sys
spec = json.loads(sys.argv[1])
for k, r in (("cpu", resource.RLIMIT_CPU), ("as", resource.RLIMIT_AS), ("fsize", resource.RLIMIT_FSIZE), ("nofile", resource.RLIMIT_NOFILE)):
    resource.setrlimit(r, (spec["limits"][k], spec["limits"][k]))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.makedirs(spec["tmp"], exist_ok=True)
log = os.open(spec["out"] + "/build.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for argv in spec["argvs"]:
    pid = os.fork()
    if pid == 0:
        os.dup2(log, 1); os.dup2(log, 2)
        try:
            os.execve(argv[0], argv, spec["env"])
        except OSError as e:
            os.write(2, f"cannot run {argv[0]}: {e}\n".encode()); os._exit(127)
    _, st = os.waitpid(pid, 0)
    code = 128 + os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
    if code:
        os._exit(code)
shutil.copyfile(spec["tmp"] + "/ext.so", spec["out"] + "/ext.so")
with open(spec["out"] + "/deps.d", "w") as deps:  # every file the preprocessor opened, per unit (-MD)
    for name in sorted(os.listdir(spec["tmp"])):
        if name.endswith(".d"):
            with open(spec["tmp"] + "/" + name) as f:
                deps.write(f.read() + "\n")
os._exit(0)
"""


def default_cache_dir() -> Path:
    return Path(os.environ.get("SHIFTKIT_KERNEL_CACHE", ".cache/kernels")).resolve()


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    protos: dict = field(default_factory=dict)  # extern "C" name -> argument kinds (lean builds)
    returns: dict = field(default_factory=dict)  # extern "C" name -> return kind ("void" when none)
    forbidden: list[str] = field(default_factory=list)  # imports the allowlist refused
    findings: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["errors"] = [e.to_dict() for e in self.errors]
        return d


def _version(tool: str) -> str:
    try:
        return subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except Exception:  # noqa: BLE001
        return "unknown"


@functools.lru_cache(maxsize=1)
def _toolchain() -> tuple[str, str, str]:
    """(the C++ compiler, the C compiler, both versions): C units are compiled as C, by the C compiler."""
    cxx = os.path.realpath(shutil.which("c++") or shutil.which("g++") or "/usr/bin/c++")
    cc = os.path.realpath(shutil.which("cc") or shutil.which("gcc") or "/usr/bin/cc")
    return cxx, cc, f"{_version(cxx)} {cxx}|{_version(cc)} {cc}"


def _salt(backend) -> str:
    import torch

    from shiftkit.kernels import symbols  # the allowlists (symbols; the baseline binding and the header rule, here)

    allow = hashlib.sha256(Path(symbols.__file__).read_bytes() + Path(__file__).read_bytes()).hexdigest()[:12]
    return f"torch={torch.__version__}|cc={_toolchain()[2]}|machine={machine_id()}|allow={allow}|v=6|" + json.dumps(
        list(backend.cflags) + list(backend.cuda_cflags))


_ERR_RE = re.compile(r"^(?P<file>[^:\n]{1,300}?):(?P<line>\d{1,9}):(?:(?P<col>\d{1,9}):)?[ \t]*(?:fatal[ \t]+)?error:[ \t]*(?P<msg>[^\n]{0,2000})$", re.M)
_LINK_RE = re.compile(r"(undefined reference to [^\n]{0,300}|ld returned \d{1,3} exit status|cannot find -l\S{1,100})")
_TOOL_RE = re.compile(r"^(?:\S{0,60}/)?(?:cc1plus|cc1|c\+\+|g\+\+|gcc|collect2|ld|nvcc|x86_64-linux-gnu-\w{1,10}(?:-\d{1,3})?): "
                      r"(?:fatal error|error): ([^\n]{0,300})$|^(virtual memory exhausted[^\n]{0,100})$", re.M)


def parse_compiler_output(text: str, src_root: str = "/src") -> list[CompileError]:
    """Pure: ``file:line:col: error: msg`` lines (gcc/clang/nvcc) -> CompileError records, for the
    solution's own files only (a message about any other file is reported without its text)."""
    out: list[CompileError] = []
    text = text[:MAX_LOG_BYTES]
    other = 0
    for m in _ERR_RE.finditer(text):
        f = m.group("file").strip()
        if f.startswith(src_root + "/"):
            f = f[len(src_root) + 1:]
        elif f not in ("cpp_sources", "cuda_sources", "<pybind glue>"):
            other += 1
            continue
        out.append(CompileError(f, int(m.group("line")), m.group("msg").strip()[:500],
                                int(m.group("col")) if m.group("col") else None))
        if len(out) >= 50:
            break
    if other and not out:
        out.append(CompileError(None, None, f"{other} error(s) inside toolchain or library headers"))
    if not out:
        for m in _LINK_RE.finditer(text):
            out.append(CompileError(None, None, m.group(1).strip()))
            if len(out) >= 20:
                break
    if not out:
        for m in _TOOL_RE.finditer(text):
            out.append(CompileError(None, None, (m.group(1) or m.group(2)).strip()))
            if len(out) >= 5:
                break
    if not out and text.strip():
        out.append(CompileError(None, None, "the build failed without a compiler diagnostic"))
    return out


def _nvcc_output_fixup(text: str) -> str:
    return re.sub(r"^([^\s(]{1,300})\((\d{1,9})\):\s*error", r"\1:\2: error", text[:MAX_LOG_BYTES], flags=re.M)


def _pybind_glue(functions: list[str]) -> str:
    defs = "\n".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in functions)
    return f'\n#line 1 "<pybind glue>"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n'


def materialize(spec: BuildSpec, src_dir: Path) -> list[str]:
    """Write the spec's files; return the translation units to compile (paths relative to ``src_dir``)."""
    src_dir.mkdir(parents=True, exist_ok=True)
    units = []
    for rel, text in spec.sources.items():
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            continue
        if spec.kind == "torch" and rel == "cpp_sources.cpp":
            text = '#include <torch/extension.h>\n#line 1 "cpp_sources"\n' + text
            if spec.functions:
                text += _pybind_glue([f for f in spec.functions if re.fullmatch(r"[A-Za-z_]\w{0,100}", f)])
        elif spec.kind == "torch" and rel == "cuda_sources.cu":
            text = '#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n#line 1 "cuda_sources"\n' + text
        p = src_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if p.suffix in (".cpp", ".cc", ".cxx", ".c", ".cu"):
            units.append(rel)
    return units


C_UNIT_EXTS = (".c",)
_CXX_STD = re.compile(r"-std=(?:c|gnu)\+\+\w+")
_C_STD = re.compile(r"-std=(?:c|gnu)\d\w*")


def _language_flags(flags: list[str], c_unit: bool) -> list[str]:
    """Pure: the flags of one unit: a C unit drops the C++ dialect (``-std=c++17``) and starts from C11 with GNU
    extensions, a C++ unit drops a C dialect; every other flag (the same allowlist) applies to both. The last
    ``-std`` wins, so a solution's own ``-std=c99`` applies to its C units."""
    if c_unit:
        return ["-std=gnu11"] + [f for f in flags if not _CXX_STD.fullmatch(f)]
    return [f for f in flags if not _C_STD.fullmatch(f)]


# appended to every C/C++ unit's flags after the candidate's own (the last flag wins): IEEE inf/NaN kept, and no
# sibling calls (see _compile_plan)
FORCED_CFLAGS = ("-fno-finite-math-only", "-fno-optimize-sibling-calls")


def _compile_plan(spec: BuildSpec, units: list[str], src: str = "/src", tmp: str = "/tmp/b") -> list[list[str]]:
    """argv lists: compile each unit from ``src`` into ``tmp``, link ``tmp``/ext.so (sandbox paths by default).
    ``.c`` units are C, compiled by the C compiler (valid C99/C11 is not always valid C++: ``restrict``, implicit
    ``void*`` conversions, designated initialisers out of order); their functions have C linkage, so C++ glue
    calls them through ``extern "C"`` declarations, and ctypes finds them by their plain names."""
    import sysconfig

    import torch.utils.cpp_extension as ce

    backend = get_backend(spec.backend)
    cxx, cc, _ = _toolchain()
    dirs = sorted({f"{src}/" + os.path.dirname(u) for u in units if os.path.dirname(u)})
    incs = [f"-I{src}"] + ["-I" + d for d in dirs]
    common = []
    if spec.kind == "torch":
        common = ["-DTORCH_EXTENSION_NAME=sk_ext", "-DTORCH_API_INCLUDE_EXTENSION_H"]
        for d in ce.include_paths() + [sysconfig.get_path("include", scheme="posix_prefix")]:
            common += ["-isystem", d]
    # IEEE inf and NaN keep their meaning in every build (last flag wins): -ffast-math and -Ofast are honoured
    # except their finite-math assumption, because the comparison feeds inputs on which the reference's
    # intermediates overflow to inf (a scaled exp) and a finite-math build returns NaN there (redteam3 hn04).
    # An explicit -ffinite-math-only is refused by the flag allowlist, with this reason.
    # Sibling calls are never made (``-fno-optimize-sibling-calls``, last): a function whose last statement is a
    # library call (``memcpy``, ``expf``) would jump to it, and the library's return address would then be its
    # caller's: ctypes' libffi for an exported kernel, so the attribution's caller rule (perf, libc and libm judged
    # by who called them) counted the kernel's own copy as the interpreter's (redteam8 hn01: the second of two
    # memcpy, half of the work, past the interpreter's allowance). With it, every call returns into its caller.
    cflags = common + incs + ["-fPIC", "-std=c++20" if spec.kind == "torch" else "-std=c++17"] + list(backend.cflags) \
        + list(spec.extra_cflags) + list(FORCED_CFLAGS)
    if spec.kind == "c":
        cflags.append("-g")  # the extern "C" prototypes are read from the debug information
    ldflags = list(backend.ldflags) + list(spec.extra_ldflags)
    if spec.kind == "torch":
        ldflags += ce._prepare_ldflags([], spec.backend == "cuda", False, False, False)
    argvs, objs = [], []
    for i, u in enumerate(units):
        obj = f"{tmp}/unit{i}.o"
        dep = ["-MD", "-MF", f"{tmp}/unit{i}.d"]  # last: the flag allowlist refuses every -M option of a candidate
        if u.endswith(".cu"):
            nvcc = os.path.join(getattr(ce, "CUDA_HOME", None) or "/usr/local/cuda", "bin", "nvcc")
            argvs.append([nvcc, "-c", f"{src}/{u}", "-o", obj, "--compiler-options", "-fPIC", *common, *incs,
                          *ce.COMMON_NVCC_FLAGS, *backend.cuda_cflags, *spec.extra_cuda_cflags, *dep])
        elif u.endswith(C_UNIT_EXTS):
            argvs.append([cc, "-c", f"{src}/{u}", "-o", obj, *_language_flags(cflags, True), *dep])
        else:
            argvs.append([cxx, "-c", f"{src}/{u}", "-o", obj, *_language_flags(cflags, False), *dep])
        objs.append(obj)
    argvs.append([cxx, *objs, "-shared", *ldflags, "-o", f"{tmp}/ext.so"])
    return argvs


def run_build(spec: BuildSpec, units: list[str], src: Path, out: Path, timeout_s: float, isolate: bool,
              mem_mb: int) -> tuple[int, str, bool]:
    """Compile and link in one sandbox; returns (exit status, build log, timed out)."""
    from shiftkit.kernels import sandbox

    limits = {"cpu": int(timeout_s) + 5, "as": mem_mb << 20, "fsize": MAX_ARTEFACT_BYTES, "nofile": 1024}
    env = sandbox.base_env()
    if isolate:
        plan = {"argvs": _compile_plan(spec, units), "tmp": "/tmp/b", "out": "/out", "limits": limits, "env": env}
        # a lean build sees the OS toolchain and the interpreter that runs it, not torch's binaries (nothing to
        # embed with .incbin); a torch binding needs torch's headers and libraries
        ro = (sandbox.python_paths() if spec.kind == "torch" else sorted({os.path.realpath(sys.base_prefix),
                                                                          os.path.realpath(sys.base_exec_prefix)}))
        ro += ["/usr/local/cuda"] if spec.backend == "cuda" else []
        cmd = sandbox.bwrap_argv(ro=ro, rw=[(str(out), "/out")], tmp_bytes=BUILD_TMP_BYTES, env=env,
                                 extra=["--ro-bind", str(src), "/src", "--chdir", "/tmp", "--"])
    else:  # allow_unisolated: the same plan on host paths
        plan = {"argvs": _compile_plan(spec, units, str(src), str(out / "tmp")), "tmp": str(out / "tmp"), "out": str(out),
                "limits": limits, "env": env}
        cmd = []
    cmd += [os.path.realpath(sys.executable), "-I", "-S", "-c", _RUNNER, json.dumps(plan)]  # the interpreter itself, not a venv link
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            close_fds=True, start_new_session=True, env=env, cwd="/")
    timed_out = False
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, err = proc.communicate()
    shutil.rmtree(out / "tmp", ignore_errors=True)
    log = ""
    try:
        with open(out / "build.log", "rb") as f:
            log = f.read(MAX_LOG_BYTES).decode(errors="replace")
    except OSError:
        pass
    return proc.returncode, (err or b"")[-2000:].decode(errors="replace") + log, timed_out


def parse_depfile(text: str) -> list[str]:
    """Pure: the prerequisites of every rule in a make depfile (``-MD`` output: ``obj: a b \\`` continued lines,
    ``\\ `` an escaped space, ``$$`` a dollar), targets dropped, in order, without repeats."""
    out: dict[str, None] = {}
    for rule in re.split(r"(?<!\\)\n", text.replace("\\\n", " ")):
        _, sep, tail = rule.partition(": ")
        if not sep:
            continue
        for tok in re.findall(r"(?:\\.|[^\s\\])+", tail):
            out.setdefault(re.sub(r"\\(.)", r"\1", tok).replace("$$", "$"), None)
    return list(out)


def torch_kernel_headers(deps: list[str], include_root: str, allowed: frozenset = frozenset()) -> list[str]:
    """Pure: the headers of ``deps`` that are torch's op kernels (under ``include_root``/ATen/native/, named
    relative to the root), less ``allowed`` (those the public headers themselves pull in). Torch's kernels
    instantiated from its headers run in the candidate's own artefact, where the sampling counts them as the
    candidate's: so they may not enter a build, as their compiled symbols may not be linked."""
    root = os.path.normpath(include_root) + "/"
    bad = []
    for d in deps:
        n = os.path.normpath(d)
        if n.startswith(root) and n[len(root):].startswith("ATen/native/") and n[len(root):] not in allowed:
            bad.append(n[len(root):])
    return sorted(set(bad))


def _torch_include_root() -> str:
    import torch.utils.cpp_extension as ce

    return os.path.normpath(ce.include_paths()[0])


# the public headers a binding may include (the vector API, TensorIterator and its old native path, parallel
# loops): the torch kernel headers they pull in themselves (ATen/native/Math.h's scalar special functions, the
# complex helpers) are allowed, as the vector math they back is (Sleef, libm); any other ATen/native header is not
PUBLIC_HEADERS = ("ATen/cpu/vec/vec.h", "ATen/cpu/vec/functional.h", "ATen/TensorIterator.h",
                  "ATen/native/TensorIterator.h", "ATen/Parallel.h")

_BASELINE: dict[str, tuple[frozenset, frozenset]] = {}  # by cache: (imports, torch kernel headers)
BASELINE_SPEC = BuildSpec(name="sk_baseline", kind="torch", backend="cpu", functions=["ident"],
                          sources={"cpp_sources.cpp": "".join(f"#include <{h}>\n" for h in PUBLIC_HEADERS) + (
                              # the public API's inline helpers an honest binding uses (at::parallel_for,
                              # at::parallel_reduce, a TensorIterator loop): whatever they make the linker name is
                              # allowed to every binding
                              "torch::Tensor ident(torch::Tensor x) {\n"
                              "  auto y = x.contiguous();\n"
                              "  at::parallel_for(0, y.numel(), 1 << 14, [&](int64_t b, int64_t e) { (void)b; (void)e; });\n"
                              "  double s = at::parallel_reduce(0, y.numel(), 1 << 14, 0.0, [&](int64_t b, int64_t e, double a) {\n"
                              "    return a + double(e - b); }, [](double a, double b) { return a + b; });\n"
                              "  (void)s;\n"
                              # TensorIterator's loop over the candidate's own lambda (redteam7 hn15)
                              "  auto out = at::empty_like(y);\n"
                              "  auto it = at::TensorIteratorConfig().add_output(out).add_const_input(y).build();\n"
                              "  it.for_each([](char** d, const int64_t* st, int64_t n) { (void)d; (void)st; (void)n; });\n"
                              "  return y;\n"
                              "}\n")})


def torch_baseline_imports(cache: Path, timeout_s: float, isolate: bool) -> frozenset:
    """The imports of the harness's own minimal torch binding (built once per cache): what any binding may import."""
    return _baseline(cache, timeout_s, isolate)[0]


def _baseline(cache: Path, timeout_s: float, isolate: bool) -> tuple[frozenset, frozenset]:
    """The baseline binding's (imports, torch kernel headers), built once per cache."""
    key = str(cache)
    if key not in _BASELINE:
        r = build(BASELINE_SPEC, cache, timeout_s, isolate=isolate, _baseline=True)
        if not r.ok:
            raise RuntimeError("the harness's baseline torch binding did not build: "
                               + "; ".join(e.message for e in r.errors)[:300])
        d = Path(r.so_path).parent
        _BASELINE[key] = (frozenset(json.loads((d / "imports.json").read_text())),
                          frozenset(json.loads((d / "headers.json").read_text())))
    return _BASELINE[key]


def torch_baseline_headers(cache: Path, timeout_s: float, isolate: bool) -> frozenset:
    """The torch kernel headers the public headers pull in (:data:`PUBLIC_HEADERS`, read from the baseline
    binding's own depfile): allowed to every build."""
    return _baseline(cache, timeout_s, isolate)[1]


_RUNTIME: dict[str, frozenset] = {}
_LIBC_NAME = re.compile(r"libc(?:\.so(?:\.\d+)*|-\d[\d.]*\.so)")


def _libc_paths() -> list[str]:
    """The C library this process (and every worker: the same OS files) runs with, from its own mappings."""
    with open("/proc/self/maps") as f:
        paths = {ln.split()[-1] for ln in f if ln.split()[-1].startswith("/")}
    return sorted(p for p in paths if _LIBC_NAME.fullmatch(os.path.basename(p)))


def runtime_imports(timeout_s: float) -> frozenset:
    """Every name the system's language runtimes export (libc, libm, libstdc++, libgcc_s, libgomp; read once per
    process, in the analysis subprocess), less libc's deny class (:func:`symbols.runtime_allowed`): an extension
    may import any of them, by library rather than by a list of names (``cexpf`` as much as ``expf``,
    ``__cxa_throw_bad_array_new_length`` as much as ``__cxa_throw``, ``getenv`` as much as ``malloc``)."""
    if "x" not in _RUNTIME:
        from shiftkit.kernels import symbols
        from shiftkit.kernels.analysis import run

        t = max(30.0, timeout_s)
        names = set(run({"op": "runtime"}, timeout_s=t)["exports"])
        for p in _libc_paths():
            names |= set(run({"op": "artefact", "path": p}, timeout_s=t)["exports"])
        _RUNTIME["x"] = symbols.runtime_allowed(names)
    return _RUNTIME["x"]


def _check_artefact(so: str, kind: str, cache: Path, timeout_s: float, isolate: bool, baseline: bool) -> tuple[dict, list[str]]:
    from shiftkit.kernels import symbols
    from shiftkit.kernels.analysis import run

    info = run({"op": "artefact", "path": so}, timeout_s=max(30.0, timeout_s))
    if baseline:
        return info, []
    own = torch_baseline_imports(cache, timeout_s, isolate) if kind == "torch" else frozenset()
    forbidden = symbols.forbidden_imports(info["undefined"], kind, info.get("demangled", {}), own, runtime_imports(timeout_s))
    return info, forbidden


def build(spec: BuildSpec, cache_dir: str | Path | None = None, timeout_s: float = 300.0, jobs: int = 1,
          isolate: bool = True, mem_mb: int = 8192, _baseline: bool = False) -> BuildResult:
    """Compile ``spec`` in the sandbox, or return the verified cached result for identical content."""
    from shiftkit.kernels.analysis import AnalysisFailed
    from shiftkit.kernels.static import disallowed_flags, flag_message

    import torch.utils.cpp_extension as ce

    backend = get_backend(spec.backend)
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    key = spec.key(_salt(backend) + ("|iso" if isolate else "|host"))
    bdir = cache / "builds" / key
    bdir.mkdir(parents=True, exist_ok=True)
    with open(bdir / ".lock", "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        done = bdir / "result.json"
        if done.is_file():
            try:
                d = json.loads(done.read_text())
                d["errors"] = [CompileError(**e) for e in d["errors"]]
                r = BuildResult(**{**d, "cached": True, "seconds": 0.0})
                if not r.ok or (r.so_path and Path(r.so_path).is_file() and file_sha256(r.so_path) == r.sha256):
                    os.utime(done)
                    return r
            except (ValueError, TypeError, KeyError, OSError):
                pass
            done.unlink()  # changed or unreadable since it was built: never trust it, rebuild
        t0 = time.perf_counter()
        for d in ("src", "out"):
            shutil.rmtree(bdir / d, ignore_errors=True)
        (bdir / "out").mkdir()
        units = materialize(spec, bdir / "src")
        errors: list[CompileError] = []
        log, so, info, forbidden = "", None, {}, []
        bad = disallowed_flags(spec.extra_cflags, spec.extra_cuda_cflags, spec.extra_ldflags)
        if bad:
            errors = [CompileError(None, None, flag_message(b)) for b in bad]
        elif not units:
            errors = [CompileError(None, None, "no translation units (.c/.cpp/.cu) in the sources")]
        elif spec.backend == "cuda" and not getattr(ce, "CUDA_HOME", None):
            errors = [CompileError(None, None, "CUDA backend requested but CUDA_HOME/nvcc not found")]
        else:
            rc, log, timed_out = run_build(spec, units, bdir / "src", bdir / "out", timeout_s, isolate, mem_mb)
            so = str(bdir / "out" / "ext.so")
            if timed_out:
                errors = [CompileError(None, None, f"compile timed out after {timeout_s:.0f} s")]
            elif log.startswith("bwrap:"):
                errors = [CompileError(None, None, "the build sandbox failed to start: " + log.splitlines()[0][:300])]
            elif rc != 0 or not Path(so).is_file():
                errors = parse_compiler_output(_nvcc_output_fixup(log))
                if rc > 128 and (not errors or errors[0].file is None):
                    errors.insert(0, CompileError(None, None, f"the compiler was killed by signal {rc - 128} (a memory, "
                                                  "CPU-time or file-size limit of the build)"))
            else:
                try:
                    info, forbidden = _check_artefact(so, spec.kind, cache, timeout_s, isolate, _baseline)
                except AnalysisFailed as e:
                    errors = [CompileError(None, None, f"the built artefact could not be analysed: {e}")]
                if not errors:
                    deps = parse_depfile(_read_text(bdir / "out" / "deps.d"))
                    allowed = frozenset() if _baseline else torch_baseline_headers(cache, timeout_s, isolate)
                    heads = torch_kernel_headers(deps, _torch_include_root(), allowed)
                    if _baseline:
                        info["headers"] = heads
                    elif heads:
                        forbidden = [f"#include <{h}>" for h in heads] + forbidden
                if forbidden:
                    errors = [CompileError(None, None, "links symbols or includes torch kernel headers outside the "
                                           "allowlist: " + ", ".join(forbidden[:12]))]
        ok = not errors
        if ok and _baseline:
            (bdir / "out" / "imports.json").write_text(json.dumps(info.get("undefined", [])))
            (bdir / "out" / "headers.json").write_text(json.dumps(info.get("headers", [])))
        res = BuildResult(ok=ok, key=key, name=spec.name, kind=spec.kind, so_path=so if ok else None, errors=errors,
                          seconds=time.perf_counter() - t0, log_tail=log[-4000:], sha256=file_sha256(so) if ok else None,
                          protos=info.get("protos", {}) if ok else {}, returns=info.get("returns", {}) if ok else {},
                          forbidden=forbidden)
        shutil.rmtree(bdir / "src", ignore_errors=True)
        if not ok and so and Path(so).exists():
            os.unlink(so)
        if any(m in e.message for e in errors for m in ("timed out", "could not be analysed", "sandbox failed to start")):
            return res  # transient: never cache
        tmp = bdir / "result.json.tmp"
        tmp.write_text(json.dumps({k: v for k, v in res.to_dict().items() if k != "cached"}))
        os.replace(tmp, done)
    prune(cache, keep=key)
    return res


def _read_text(p: Path, limit: int = 8 << 20) -> str:
    try:
        with open(p, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def prune(cache: Path, max_bytes: int = DEFAULT_CACHE_CAP, keep: str = "") -> None:
    """Keep the build cache under ``max_bytes``: the least recently used builds go first."""
    root = cache / "builds"
    try:
        entries = []
        total = 0
        for d in root.iterdir():
            size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            r = d / "result.json"
            entries.append((r.stat().st_mtime if r.exists() else 0, size, d))
            total += size
    except OSError:
        return
    for _, size, d in sorted(entries):
        if total <= max_bytes:
            break
        if d.name == keep:
            continue
        shutil.rmtree(d, ignore_errors=True)
        total -= size
