"""Static checks on solution source: pure ``str -> list[Finding]`` functions.

Python sources are checked on the AST (no regex false positives from comments or strings); C++/CUDA
sources with regexes over comment-stripped text. The checks are a first layer: the worker's runtime op
blocking, the trusted-parent checker and the process boundary catch what a static scan cannot.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from shiftkit.kernels.findings import Finding

THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "signal"}
INTROSPECTION_MODULES = {"inspect", "gc", "ctypes", "traceback", "dis", "importlib", "builtins", "pickle", "marshal"}
IO_MODULES = {"socket", "urllib", "requests", "http", "ftplib", "shutil", "tempfile", "pathlib", "glob", "io", "httpx"}
FOREIGN_MODULES = {"numpy", "scipy", "numba", "jax", "cupy", "tensorflow"}
HARNESS_MODULES = {"shiftkit", "time", "timeit", "torch", "builtins", "sys", "os", "gc", "inspect"}
# names that only make sense for reaching into frames/objects of the harness
INTROSPECTION_ATTRS = {"_getframe", "f_back", "f_locals", "f_globals", "gi_frame", "tb_frame", "modules",
                       "get_objects", "get_referrers", "get_referents", "__subclasses__", "__globals__", "__code__"}
OS_FILE_CALLS = {"system", "popen", "remove", "unlink", "rename", "replace", "fork", "spawnl", "spawnv", "execv",
                 "execl", "kill", "listdir", "scandir", "walk", "mkdir", "makedirs", "rmdir", "open", "write", "read"}
REFERENCE_MODULE_NAMES = {"model", "reference", "problem", "ref", "__main__"}
LOWP_PY = {"float16", "half", "bfloat16", "allow_tf32", "set_float32_matmul_precision", "autocast"}
# torch calls that only allocate, view or read metadata (the same idea as the runtime allowlist)
TORCH_ALLOWED_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "tensor", "Size", "device", "dtype",
    "no_grad", "inference_mode", "manual_seed", "is_tensor", "numel", "get_default_dtype", "from_numpy",
}
TENSOR_ALLOWED_METHODS = {
    "contiguous", "view", "reshape", "size", "dim", "numel", "stride", "data_ptr", "is_contiguous", "view_as",
    "unsqueeze", "squeeze", "permute", "transpose", "t", "expand", "new_empty", "new_zeros", "zero_", "item",
    "element_size", "storage_offset", "flatten", "unflatten", "detach", "clone", "copy_", "narrow", "select",
    "split", "chunk", "unbind", "fill_", "eval", "train", "parameters", "buffers", "named_parameters",
    "register_buffer", "register_parameter", "to", "cpu", "cuda", "float", "get", "items", "keys", "values",
    "append", "extend", "format", "join", "startswith", "endswith", "strip", "split", "replace", "update",
}


def _f(code: str, msg: str, node: ast.AST | None = None, severity: str = "error") -> Finding:
    where = f"line {getattr(node, 'lineno', '?')}" if node is not None else None
    return Finding(code, msg, severity, where)


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _parse(src: str) -> ast.Module | None:
    try:
        return ast.parse(src)
    except SyntaxError:
        return None


def _imports(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            out.append(("." * node.level + mod, node))
            out += [(f"{mod}.{a.name}", node) for a in node.names]
    return out


def check_syntax(src: str) -> list[Finding]:
    try:
        ast.parse(src)
    except SyntaxError as e:
        return [Finding("syntax_error", f"{e.msg}", "error", f"line {e.lineno}")]
    return []


def check_try_except(src: str) -> list[Finding]:
    """Any try/except in the solution is a potential silent fallback to the reference."""
    tree = _parse(src)
    if tree is None:
        return []
    return [_f("fallback_try_except", "try/except can hide a fallback path; let errors propagate", n)
            for n in ast.walk(tree) if isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try)))]


def check_inherits_reference(src: str) -> list[Finding]:
    tree = _parse(src)
    if tree is None:
        return []
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                name = _dotted(b)
                if name == "Model" or name.endswith(".Model"):
                    out.append(_f("inherits_reference", f"class {n.name} subclasses {name}", n))
    return out


def check_imports_reference(src: str) -> list[Finding]:
    tree = _parse(src)
    if tree is None:
        return []
    out = []
    for name, node in _imports(tree):
        head = name.lstrip(".").split(".")[0]
        if head in REFERENCE_MODULE_NAMES or name.endswith(".Model") or "fixtures.problems" in name:
            out.append(_f("imports_reference", f"imports {name!r}", node))
    for n in ast.walk(tree):  # __import__('model') / importlib.import_module(...)
        if isinstance(n, ast.Call) and _dotted(n.func) in ("__import__", "importlib.import_module", "exec", "eval"):
            out.append(_f("imports_reference", f"dynamic import/exec via {_dotted(n.func)}()", n))
    return out


def check_threads(src: str) -> list[Finding]:
    tree = _parse(src)
    if tree is None:
        return []
    out = [_f("threads_or_processes", f"imports {name!r}", node) for name, node in _imports(tree)
           if name.lstrip(".").split(".")[0] in THREAD_MODULES]
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _dotted(n.func) in ("os.fork", "os.forkpty", "torch.multiprocessing.spawn"):
            out.append(_f("threads_or_processes", f"calls {_dotted(n.func)}()", n))
        if isinstance(n, ast.Attribute) and n.attr in ("Stream", "stream", "set_num_threads", "set_num_interop_threads"):
            out.append(_f("threads_or_processes", f"uses {_dotted(n)} (streams/threads are managed by the harness)", n))
    return out


def check_monkey_patch(src: str) -> list[Finding]:
    """Assignments to attributes of modules/classes (``torch.x = ...``, ``setattr(time, ...)``)."""
    tree = _parse(src)
    if tree is None:
        return []
    imported = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    out = []
    for n in ast.walk(tree):
        targets = []
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        elif isinstance(n, ast.Delete):
            targets = n.targets
        for t in targets:
            if isinstance(t, ast.Attribute):
                root = _root_name(t)
                if root in imported or root in HARNESS_MODULES:
                    out.append(_f("monkey_patch", f"assigns {_dotted(t) or 'attribute'} of imported module {root!r}", n))
        if isinstance(n, ast.Call) and _dotted(n.func) in ("setattr", "delattr", "object.__setattr__"):
            root = _root_name(n.args[0]) if n.args else None
            if root != "self":
                out.append(_f("monkey_patch", f"{_dotted(n.func)}() on {root!r}", n))
        if isinstance(n, ast.Name) and n.id in ("__builtins__",):
            out.append(_f("monkey_patch", "touches __builtins__", n))
        if isinstance(n, ast.Global):
            pass
    return out


def check_introspection(src: str) -> list[Finding]:
    tree = _parse(src)
    if tree is None:
        return []
    out = [_f("introspection", f"imports {name!r}", node) for name, node in _imports(tree)
           if name.lstrip(".").split(".")[0] in INTROSPECTION_MODULES]
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in INTROSPECTION_ATTRS:
            out.append(_f("introspection", f"accesses .{n.attr}", n))
        if isinstance(n, ast.Call) and _dotted(n.func) in ("globals", "locals", "vars", "sys._getframe", "id"):
            out.append(_f("introspection", f"calls {_dotted(n.func)}()", n))
    return out


def check_file_network(src: str) -> list[Finding]:
    tree = _parse(src)
    if tree is None:
        return []
    out = [_f("file_or_network_access", f"imports {name!r}", node) for name, node in _imports(tree)
           if name.lstrip(".").split(".")[0] in IO_MODULES]
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            d = _dotted(n.func)
            if d in ("open", "input", "torch.load", "torch.save"):
                out.append(_f("file_or_network_access", f"calls {d}()", n))
            elif d.startswith("os.") and d.split(".")[-1] in OS_FILE_CALLS:
                out.append(_f("file_or_network_access", f"calls {d}()", n))
    return out


def check_foreign_compute(src: str) -> list[Finding]:
    tree = _parse(src)
    if tree is None:
        return []
    out = [_f("foreign_compute", f"imports {name!r}", node) for name, node in _imports(tree)
           if name.lstrip(".").split(".")[0] in FOREIGN_MODULES]
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in ("numpy", "tolist", "__array__"):
            out.append(_f("foreign_compute", f"uses .{n.attr} (compute outside kernels)", n))
    return out


# torch entry points that substitute a library/compiler for the kernel, or reach under the op blocker
SUBSTITUTION_ATTRS = {"compile", "_dynamo", "_inductor", "jit", "_scaled_mm", "_C", "_ops", "library", "export",
                      "fx", "_python_dispatch", "_disable_current_modes", "_pop_mode", "_push_mode", "overrides",
                      "_higher_order_ops", "_prims", "_refs", "_decomp", "func", "vmap", "backends", "mkldnn", "_nnpack",
                      "addaudithook", "settrace", "setprofile", "register_forward_hook", "register_forward_pre_hook",
                      "register_module_forward_hook", "register_module_forward_pre_hook", "_subclasses", "_functorch",
                      "CUDAGraph", "graph", "graphs", "make_graphed_callables", "Event", "_sleep", "set_per_process_memory_fraction"}


def check_library_substitution(src: str) -> list[Finding]:
    """torch.compile / TorchScript / torch.library / private torch internals (``torch._scaled_mm``, dispatch
    modes, ``_disable_current_modes``), audit/trace hooks: a library or compiler in the kernel's place, or a way
    around the op blocker."""
    tree = _parse(src)
    if tree is None:
        return []
    out = []
    for name, node in _imports(tree):
        parts = name.lstrip(".").split(".")
        if parts[0] == "torch" and any(p in SUBSTITUTION_ATTRS for p in parts[1:]):
            out.append(_f("library_substitution", f"imports {name!r}", node))
        if parts[0] in ("triton", "tvm", "onnxruntime", "openvino", "tensorrt", "torch_tensorrt", "functorch"):
            out.append(_f("library_substitution", f"imports {name!r}", node))
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in SUBSTITUTION_ATTRS:
            root = _root_name(n)
            if root in ("torch", "sys", "nn", "F", "self") or (root and n.attr.startswith("_")):
                if not (n.attr == "func" and root != "torch"):
                    out.append(_f("library_substitution", f"uses {_dotted(n) or n.attr}", n))
    return out


def check_precision_python(src: str, allow_reduced_precision: bool = False) -> list[Finding]:
    if allow_reduced_precision:
        return []
    tree = _parse(src)
    if tree is None:
        return []
    return [_f("precision_lowering", f"uses {n.attr}", n) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in LOWP_PY]


def check_torch_compute_python(src: str) -> list[Finding]:
    """Warning only: torch compute calls in Python. The runtime op blocker makes the decision."""
    tree = _parse(src)
    if tree is None:
        return []
    out = []
    aliases = {"torch", "F", "nn", "functional"}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            d = _dotted(n.func)
            root = d.split(".")[0]
            last = d.split(".")[-1]
            if root in aliases and last not in TORCH_ALLOWED_CALLS and not last[:1].isupper() and not d.startswith(("torch.utils", "nn.Module", "torch.nn.Module", "nn.Parameter", "torch.nn.Parameter", "torch.Size")):
                out.append(_f("torch_compute_in_python", f"calls {d}()", n, "warning"))
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            out.append(_f("torch_compute_in_python", "uses the @ operator", n, "warning"))
    return out


# ----------------------------------------------------------------------------- C++ / CUDA

def strip_c_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def _c_findings(src: str, code: str, pattern: str, msg: str, severity: str = "error") -> list[Finding]:
    text = strip_c_comments(src)
    out = []
    for m in re.finditer(pattern, text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(Finding(code, f"{msg}: {m.group(0).strip()!r}", severity, f"line {line}"))
    return out


C_ALLOWED_TORCH = ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "Tensor", "TensorOptions",
                   "IntArrayRef", "ScalarType", "Device", "kFloat", "kDouble", "kInt", "kLong", "kCPU", "kCUDA",
                   "kBool", "kByte", "Scalar", "Layout", "Generator", "optional", "MemoryFormat", "TensorArg",
                   "checkDim", "checkSize", "Half", "BFloat16", "Library", "dtype", "device")


# process/thread creation and raw syscalls (a child or a raw clone escapes per-thread accounting)
C_PROCESS = (r"\b(?:std::thread|std::async|std::jthread)\b|(?<![.>:\w])(pthread_create|thrd_create|fork|vfork|clone|clone3|__clone|"
             r"posix_spawnp?|popen|system|exec[lv]p?e?|syscall|__syscall|kill|tgkill|tkill|raise|sigaction|signal|"
             r"sigqueue|ptrace|prctl|setrlimit|prlimit|setpgid|setsid|unshare|setns|cudaStreamCreate\w*)\s*\(|"
             r"\bat::cuda::getStreamFromPool\b|\b__asm__\b|\basm\s*(volatile\s*)?\(|\bstd::filesystem\b")
# files, sockets, dynamic loading, environment, memory protection, fd writes
C_FILE = (r"(?<![.>:\w])(fopen|freopen|fdopen|open|open64|openat|openat2|creat|opendir|fdopendir|scandir|readdir|rename|renameat2?|"
          r"unlink|unlinkat|remove|rmdir|mkdir|mkdirat|link|symlink|chmod|chown|truncate|ftruncate|mmap|mmap64|mremap|"
          r"mprotect|madvise|munmap|shm_open|memfd_create|userfaultfd|socket|socketpair|connect|bind|accept|sendto|"
          r"sendmsg|recvmsg|send|recv|write|pwrite|writev|read|pread|readv|dup|dup2|dup3|ioctl|fcntl|pipe|pipe2|"
          r"dlopen|dlsym|dlvsym|dladdr|dlinfo|getenv|secure_getenv|setenv|putenv|unsetenv|getauxval|"
          r"std::ifstream|std::ofstream|std::fstream)\s*\(|\b(std::ifstream|std::ofstream|std::fstream|environ|__environ)\b|"
          r"\bstd::filesystem::|/proc/|/dev/|\.incbin\b")
C_INCLUDE = r"#\s*include\s*[<\"](?:/|[^>\"]*\.\.)[^>\"]*[>\"]|#\s*include\s*[<\"](?:dlfcn|spawn|filesystem|fstream|sys/syscall|sys/ptrace|sys/socket|linux/\w+)(?:\.h)?[>\"]"
# vendor libraries: calling BLAS/LAPACK/MKL/oneDNN/cuBLAS/cuDNN from kernel source is a fallback
C_VENDOR = (r"\b(?:[sdcz](?:gemm|gemv|axpy|dot|trsm|syrk|gesv|getrf|potrf)_|cblas_\w+|mkl_\w+|MKL_\w+|dnnl_\w+|"
            r"dnnl::\w+|mkldnn_\w+|openblas_\w+|LAPACKE_\w+|cublas\w*|cudnn\w*|cutlass::\w+|cub::\w+|thrust::\w+)\b|"
            r"#\s*include\s*[<\"](?:mkl|cblas|lapacke|dnnl|oneapi|openblas|cublas|cudnn|cutlass|cub/|thrust/)[^>\"]*[>\"]")
# precision: types/intrinsics (``half`` only as a CUDA type in a declaration, so a variable named half is fine)
C_LOWP = (r"(\b__half2?\b|__float2half\w*|__half2float|__nv_bfloat16\w*|\b_Float16\b|\b__fp16\b|\b__bf16\b|"
          r"\bat::kHalf\b|\bat::kBFloat16\b|\bc10::Half\b|\bc10::BFloat16\b|\bat::Half\b|\bat::BFloat16\b|__fmul_rn|__expf|"
          r"__logf|__fdividef|-ffast-math|--use_fast_math|allow_tf32|wmma::|__nv_fp8\w*|#\s*include\s*[<\"]cuda_(?:fp16|bf16|fp8)\.h|"
          r"_mm\d*_cvt\w*ph\w*|_mm\d*_\w*_ph\b|_mm\d*_\w*bf16\w*|"
          r"#\s*pragma\s+GCC\s+optimize|__attribute__\s*\(\(\s*optimize|#\s*pragma\s+float_control|#\s*pragma\s+STDC\s+FP_CONTRACT)")
CUDA_HALF_DECL = r"(?:^|[;{}(,<]|\bconst\b|\bstatic\b|__shared__|__device__)\s*half2?\s*[*&]*\s*(?=[A-Za-z_]\w*\s*[=;,)\[(])"


# GPU timing interference: graphs (replay), events (a clock of the candidate's own), persisting-L2 windows
C_GPU_TIMING = (r"\b(cudaGraph\w*|cudaStreamBeginCapture\w*|cudaStreamEndCapture|at::cuda::CUDAGraph|cudaEvent\w*|"
                r"cudaStreamSetAttribute|cudaAccessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaDeviceSetLimit|"
                r"cudaCtxResetPersistingL2Cache|cudaFuncSetAttribute\s*\([^)]*PreferredSharedMemoryCarveout)\b")


def check_cpp(src: str, allow_reduced_precision: bool = False, cuda: bool = False) -> list[Finding]:
    out = []
    out += _c_findings(src, "timing_interference", C_GPU_TIMING, "CUDA graph/event/persisting-L2 API in kernel source")
    out += _c_findings(src, "threads_or_processes", C_PROCESS, "threads/processes/signals/raw syscalls in kernel source")
    out += _c_findings(src, "file_or_network_access", C_FILE, "file/fd/network/dynamic-loading/environment access in kernel source")
    out += _c_findings(src, "file_or_network_access", C_INCLUDE, "include of a host path or an OS interface header")
    out += _c_findings(src, "vendor_library", C_VENDOR, "vendor library (BLAS/LAPACK/MKL/oneDNN/cuBLAS) called from kernel source")
    out += _c_findings(src, "introspection", r"\b(PyEval_GetFrame|PyImport_ImportModule|PyRun_\w+|py::module_::import|py::module::import|py::eval|py::exec|Py_\w+|PyObject_\w+|PySys_\w+)\b",
                       "Python introspection/imports from kernel source")
    allowed = "|".join(C_ALLOWED_TORCH)
    out += _c_findings(src, "torch_op_in_kernel", rf"\b(?:torch|at)::(?!(?:{allowed})\b)(?!native::)(?!cuda::)[a-z_][a-z0-9_]*\s*\(",
                       "torch/ATen op called from kernel source", "warning")
    out += _c_findings(src, "torch_op_in_kernel", r"\.\s*(matmul|mm|bmm|addmm|softmax|relu|sum|mean|conv\w*|exp|tanh|sigmoid|gelu|layer_norm|max|min|pow|sqrt)\s*\(",
                       "Tensor method compute call in kernel source", "warning")
    if not allow_reduced_precision:
        out += _c_findings(src, "precision_lowering", C_LOWP, "reduced-precision type/intrinsic")
        if cuda:
            out += _c_findings(src, "precision_lowering", CUDA_HALF_DECL, "CUDA half type")
    return out


# Candidate build flags: an allowlist, each flag matched whole (no shell metacharacters can pass)
_CFLAG_OK = re.compile(r"-O[0-3s]?|-Ofast|-ffast-math|-funsafe-math-optimizations|-march=native|-mtune=native|-m(?:avx|avx2|avx512(?:f|cd|bw|dq|vl|vnni)|fma|f16c|sse[234]?(?:\.[12])?|ssse3|bmi2?|popcnt|lzcnt)"
                       r"|-fopenmp|-funroll-loops|-fno-unroll-loops|-ftree-vectorize|-fno-tree-vectorize|-fstrict-aliasing|-fomit-frame-pointer"
                       r"|-fno-exceptions|-fno-rtti|-fPIC|-std=(?:c|gnu)\+\+(?:11|14|17|20)|-std=(?:c|gnu)(?:99|11|17)"
                       r"|-D[A-Za-z_]\w{0,63}(?:=[A-Za-z0-9_.]{0,64})?|-U[A-Za-z_]\w{0,63}|-W(?:all|extra|error|no-[a-z][a-z0-9-]{0,40})|-w|-g|-g[0-3]")
_CUDAFLAG_OK = re.compile(r"-O[0-3]|-arch=sm_\d{2,3}a?|-gencode=arch=compute_\d{2,3}a?,code=sm_\d{2,3}a?|--expt-relaxed-constexpr"
                          r"|--expt-extended-lambda|-lineinfo|-std=c\+\+(?:14|17|20)|-D[A-Za-z_]\w{0,63}(?:=[A-Za-z0-9_.]{0,64})?"
                          r"|--use_fast_math|-Xptxas=-v|--ptxas-options=-v")
_LDFLAG_OK = re.compile(r"-fopenmp|-lm|-lgomp|-O[0-3]")
FAST_MATH_FLAGS = ("-ffast-math", "--use_fast_math", "-Ofast", "-funsafe-math-optimizations")


def disallowed_flags(cflags: list[str], cuda_cflags: list[str] = (), ldflags: list[str] = ()) -> list[str]:
    """Pure: candidate flags not on the allowlist (anything naming files, linker/assembler pass-through,
    plugins, specs, response files, include paths; all must match whole)."""
    bad = [f for f in cflags if not isinstance(f, str) or not _CFLAG_OK.fullmatch(f)]
    bad += [f for f in cuda_cflags if not isinstance(f, str) or not _CUDAFLAG_OK.fullmatch(f)]
    bad += [f for f in ldflags if not isinstance(f, str) or not _LDFLAG_OK.fullmatch(f)]
    return [str(b) for b in bad]


PY_CHECKS: dict[str, Callable[[str], list[Finding]]] = {
    "syntax": check_syntax,
    "try_except": check_try_except,
    "inherits_reference": check_inherits_reference,
    "imports_reference": check_imports_reference,
    "threads": check_threads,
    "monkey_patch": check_monkey_patch,
    "introspection": check_introspection,
    "file_network": check_file_network,
    "foreign_compute": check_foreign_compute,
    "library_substitution": check_library_substitution,
    "torch_compute_python": check_torch_compute_python,
}


def check_python(src: str, allow_reduced_precision: bool = False, skip: tuple[str, ...] = ()) -> list[Finding]:
    for s in skip:
        if s not in PY_CHECKS:
            raise ValueError(f"unknown static check {s!r}; valid: {', '.join(PY_CHECKS)}")
    out: list[Finding] = []
    for name, fn in PY_CHECKS.items():
        if name not in skip:
            out += fn(src)
    out += check_precision_python(src, allow_reduced_precision)
    return out


def check_flags(flags: list[str], allow_reduced_precision: bool = False, cuda_flags: list[str] = (),
                ldflags: list[str] = ()) -> list[Finding]:
    out = [Finding("build_flag", f"build flag {b!r} is not on the allowlist", "error", "flags")
           for b in disallowed_flags(flags, cuda_flags, ldflags)]
    if not allow_reduced_precision:
        out += [Finding("precision_lowering", f"compiler flag {b}", "error", "flags")
                for b in list(flags) + list(cuda_flags) if b in FAST_MATH_FLAGS]
    return out
