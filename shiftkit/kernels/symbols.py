"""What a built extension links against, and the C prototypes of its exports, read from the ELF file.

:func:`elf_info` reads the artefact (pyelftools: the dynamic symbol table, ``DT_NEEDED`` and the DWARF
debug information) and runs in the analysis subprocess, never in the parent. :func:`forbidden_imports` is
the allowlist, a pure function of the symbol names: an extension may import the C and C++ runtime by
library (every export of the system's libc, libm, libstdc++, libgcc_s and libgomp, libc less a deny class:
dynamic loading, processes, raw system calls, other processes' memory, executable or remapped memory,
sockets, namespaces), libmvec, and, for torch bindings, what the harness's own empty binding imports, the
CPython C API less what runs or imports code or controls the interpreter, operators through the dispatcher
(``at::_ops::<op>::call``; where their time goes is the parent's sampling's business), operator registration
(``TORCH_LIBRARY``) and c10's core types. Everything else is refused by name: entry points below the
dispatcher (``at::cpu::``, ``at::native::``, the dispatcher's own lookup tables), vendor BLAS/LAPACK,
oneDNN/MKL. However the source spelled a call (macros, token pasting, templates), the linker had to name
the symbol.
"""

from __future__ import annotations

import re

# ------------------------------------------------------------------------------- ELF + DWARF (analysis side)

_ENC = {2: "bool", 4: "f", 5: "i", 6: "i", 7: "u", 8: "u", 0x10: "u"}  # DW_ATE_*: boolean, float, signed(_char), unsigned(_char), UTF


def _kind(die, depth: int = 0) -> str:
    """A DWARF type DIE -> ptr | i8..i64 | u8..u64 | f32 | f64 | bool | '<unsupported what>'."""
    if die is None or depth > 32:
        return "<void>"
    tag = die.tag
    if tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_rvalue_reference_type", "DW_TAG_array_type"):
        return "ptr"
    if tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type",
               "DW_TAG_atomic_type", "DW_TAG_enumeration_type") and "DW_AT_type" in die.attributes:
        return _kind(die.get_DIE_from_attribute("DW_AT_type"), depth + 1)
    if tag == "DW_TAG_enumeration_type":
        return {1: "i8", 2: "i16", 4: "i32", 8: "i64"}.get(die.attributes.get("DW_AT_byte_size").value if "DW_AT_byte_size" in die.attributes else 4, "<enum>")
    if tag == "DW_TAG_base_type":
        enc = die.attributes["DW_AT_encoding"].value if "DW_AT_encoding" in die.attributes else 0
        size = die.attributes["DW_AT_byte_size"].value if "DW_AT_byte_size" in die.attributes else 0
        e = _ENC.get(enc)
        if e == "bool" and size == 1:
            return "bool"
        if e == "f" and size in (4, 8):
            return f"f{size * 8}"
        if e in ("i", "u") and size in (1, 2, 4, 8):
            return f"{e}{size * 8}"
        name = die.attributes["DW_AT_name"].value.decode(errors="replace") if "DW_AT_name" in die.attributes else "?"
        return f"<{name}>"
    return f"<{tag.replace('DW_TAG_', '')}>"


def _params(die) -> list[str]:
    """The argument kinds of a subprogram or subroutine-type DIE."""
    kinds = []
    for ch in die.iter_children():
        if ch.tag == "DW_TAG_formal_parameter":
            kinds.append(_kind(ch.get_DIE_from_attribute("DW_AT_type")) if "DW_AT_type" in ch.attributes else "<?>")
        elif ch.tag == "DW_TAG_unspecified_parameters":
            kinds.append("<variadic>")
    return kinds


def _return_kind(die) -> str:
    """The return kind of a subprogram or subroutine-type DIE: ``void`` when it has none."""
    return _kind(die.get_DIE_from_attribute("DW_AT_type")) if "DW_AT_type" in die.attributes else "void"


def _returned_function(die):
    """A resolver DIE's return type, if it is a pointer to a function type: the DW_TAG_subroutine_type."""
    for _ in range(16):
        if die is None or "DW_AT_type" not in die.attributes:
            return None
        die = die.get_DIE_from_attribute("DW_AT_type")
        if die.tag == "DW_TAG_subroutine_type":
            return die
        if die.tag not in ("DW_TAG_pointer_type", "DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type"):
            return None
    return None


def _prototypes(elf, exported: set[str], resolvers: dict[int, str] | None = None,
                returns: dict[str, str] | None = None) -> dict[str, list[str]]:
    """{exported C name: argument kinds} from the DWARF subprograms named so (``returns``, if given, is filled
    with {name: return kind}: a lean function may return its scalar result). ``resolvers``: {address: name} of
    IFUNC exports (the symbol's value is its resolver's address): one the compiler described no subprogram for (a
    hand-written ``__attribute__((ifunc))`` is a declaration only) takes the function type its resolver returns
    (``target_clones`` keeps the function's own subprogram, as the abstract origin of its clones)."""
    if not elf.has_dwarf_info():
        return {}
    out: dict[str, list[str]] = {}
    via_resolver: dict[str, list[str]] = {}
    ret: dict[str, str] = {}
    via_resolver_ret: dict[str, str] = {}
    resolvers = resolvers or {}
    dw = elf.get_dwarf_info()
    for cu in dw.iter_CUs():
        for die in cu.iter_DIEs():
            if die.tag != "DW_TAG_subprogram":
                continue
            a = die.attributes
            if resolvers and "DW_AT_low_pc" in a and a["DW_AT_low_pc"].form == "DW_FORM_addr" \
                    and a["DW_AT_low_pc"].value in resolvers:
                fn = _returned_function(die)
                if fn is not None:
                    via_resolver.setdefault(resolvers[a["DW_AT_low_pc"].value], _params(fn))
                    via_resolver_ret.setdefault(resolvers[a["DW_AT_low_pc"].value], _return_kind(fn))
            if "DW_AT_name" not in a:
                continue
            if "DW_AT_linkage_name" in a or "DW_AT_MIPS_linkage_name" in a or "DW_AT_specification" in a:
                continue  # C++ linkage
            name = a["DW_AT_name"].value.decode(errors="replace")
            if name not in exported or name in out:
                continue
            out[name] = _params(die)
            ret[name] = _return_kind(die)
    if returns is not None:
        returns.update({**via_resolver_ret, **ret})
    return {**via_resolver, **out}


# Callable exports: plain functions and IFUNCs (``target_clones``, ``ifunc``): an IFUNC symbol is resolved at
# load time to one of its clones, which all share the function's prototype.
_IFUNC = ("STT_GNU_IFUNC", "STT_LOOS")  # STT_GNU_IFUNC is STT_LOOS (10): pyelftools 0.33 names it so
_CALLABLE = ("STT_FUNC",) + _IFUNC


def elf_info(path: str) -> dict:
    """{"undefined": [...], "defined_functions": [...], "exports": [...], "needed": [...], "protos": {name: [kinds]},
    "returns": {name: kind}}
    (``exports``: every name it defines, data included)."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        undefined, defined, exported, resolvers = set(), set(), set(), {}
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is not None:
            for s in dynsym.iter_symbols():
                if not s.name:
                    continue
                if s["st_shndx"] == "SHN_UNDEF":
                    undefined.add(s.name)
                elif s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE", "STB_LOOS"):
                    exported.add(s.name)
                    if s["st_info"]["type"] in _CALLABLE:
                        defined.add(s.name)
                    if s["st_info"]["type"] in _IFUNC and not s.name.startswith("_Z"):
                        resolvers[s["st_value"]] = s.name
        needed = []
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                needed += [t.needed for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
        returns: dict[str, str] = {}
        protos = _prototypes(elf, {n for n in defined if not n.startswith("_Z")}, resolvers, returns)
    return {"undefined": sorted(undefined), "defined_functions": sorted(defined), "exports": sorted(exported),
            "needed": needed, "protos": protos, "returns": {n: returns[n] for n in protos if n in returns}}


def exports(path: str) -> list[str]:
    """The names a shared library defines in its dynamic symbol table (functions, IFUNCs and data)."""
    from elftools.elf.elffile import ELFFile

    out = set()
    with open(path, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        for s in dynsym.iter_symbols() if dynsym is not None else ():
            if s.name and s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK"):
                out.add(s.name)
    return sorted(out)


_DEMANGLE = None


def demangle(names: list[str]) -> dict[str, str]:
    """Itanium C++ names -> readable, with libstdc++'s own ``__cxa_demangle``."""
    import ctypes

    global _DEMANGLE
    if _DEMANGLE is None:
        lib = ctypes.CDLL("libstdc++.so.6")
        fn = lib.__cxa_demangle
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        _DEMANGLE = (fn, ctypes.CDLL(None).free)
    fn, free = _DEMANGLE
    import ctypes

    free.argtypes = [ctypes.c_void_p]
    out = {}
    for n in names:
        if not n.startswith("_Z"):
            continue
        st = ctypes.c_int(0)
        p = fn(n.encode(), None, None, ctypes.byref(st))
        if p and st.value == 0:
            out[n] = ctypes.string_at(p).decode(errors="replace")
            free(p)
    return out


# ------------------------------------------------------------------------------- the allowlist (pure)

_LIBM = {"acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign", "cos", "cosh", "erf",
         "erfc", "exp", "exp10", "exp2", "expm1", "fabs", "fdim", "floor", "fma", "fmax", "fmin", "fmod", "frexp", "hypot",
         "ilogb", "ldexp", "lgamma", "llrint", "llround", "log", "log10", "log1p", "log2", "logb", "lrint", "lround",
         "modf", "nan", "nearbyint", "nextafter", "nexttoward", "pow", "remainder", "remquo", "rint", "round", "scalbln",
         "scalbn", "sin", "sincos", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc", "j0", "j1", "y0", "y1", "gamma",
         "significand", "isinf", "isnan", "finite", "signbit", "lgamma_r"}
_LIBC = {"memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strcmp", "strncmp", "strcpy", "strncpy", "strchr",
         "strrchr", "strstr", "strnlen", "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
         "memalign", "valloc", "printf", "puts", "putchar", "fprintf", "fputs", "fputc", "fwrite", "fflush", "snprintf",
         "sprintf", "vsnprintf", "vfprintf", "vprintf", "stdout", "stderr", "abort", "__assert_fail", "qsort", "bsearch",
         "abs", "labs", "llabs", "div", "ldiv", "rand", "srand", "__stack_chk_fail", "__tls_get_addr", "__cxa_finalize",
         "__cxa_atexit", "__cxa_thread_atexit_impl", "__gmon_start__", "_ITM_deregisterTMCloneTable",
         "_ITM_registerTMCloneTable", "__errno_location", "strtol", "strtod", "strtof", "atoi", "atof", "sched_yield",
         "pthread_once", "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_key_create", "pthread_getspecific",
         "pthread_setspecific", "pthread_self", "__pthread_key_create", "sysconf", "get_nprocs", "__sched_cpucount",
         "nanosleep", "usleep", "clock_gettime", "clock", "time", "gettimeofday", "__cxa_guard_acquire",
         "__cxa_guard_release", "__cxa_guard_abort", "__cxa_pure_virtual", "__cxa_begin_catch", "__cxa_end_catch",
         "__cxa_rethrow", "__cxa_throw", "__cxa_allocate_exception", "__cxa_free_exception", "__gxx_personality_v0",
         "__cxa_demangle", "__dso_handle"}
_C_PATTERNS = re.compile(
    r"(?:(?:__)?(?:" + "|".join(sorted(_LIBM)) + r")[fl]?(?:_finite)?"  # libm, float/long variants
    r"|_ZGV\w+"  # libmvec vector variants (-O3 -march=native vectorises libm calls)
    r"|GOMP_\w+|omp_\w+|__kmpc_\w+"  # the OpenMP runtime
    r"|_Unwind_\w+|__(?:udiv|div|mod|umod|mul|ashl|ashr|lshr|fix|float|extend|trunc|pow|neg)\w*"  # libgcc helpers
    r"|__\w+_chk|__isoc99_\w+|__ctype_\w+|__libc_single_threaded)")
# libc is allowed as a library, like libm (every name the system's libc exports, read from its dynamic table:
# getenv, pthread_create, open, qsort, ...), less this deny class: what reaches beyond the calling process's own
# computation or hides where code came from. Each is refused at run time too (the sandbox, seccomp, the parent's
# sampling), and inline assembly needs no import at all; the link-time refusal names the intent early and
# plainly. Not denied: files (the sandbox holds only the OS, torch and /sol), signals (a handler changes only
# what its own process does; the parent's clock, freezer and reads do not depend on it), threads (confined to
# the cpuset and counted by the cgroup), sleeping, affinity and priority, madvise.
_LIBC_DENY = re.compile(
    r"_*(?:dl\w*"  # dynamic loading: code no build produced and no allowlist read (dlopen, dlsym, dladdr, _dl_*)
    r"|[Ff]ork|vfork|clone\w*|daemon|forkpty|f?exec\w*|posix_spawn\w*|system|popen"  # processes and exec
    r"|syscall"  # any system call by number
    r"|ptrace|process_vm_\w+|pidfd_\w+"  # other processes' memory and descriptors
    r"|prctl|arch_prctl|personality"  # process attributes (the perf-event switch is a prctl)
    # executable or remapped memory: whether mmap/mprotect want PROT_EXEC is a run-time argument the link cannot
    # see, and a kernel needs neither (malloc/aligned_alloc/posix_memalign, madvise for huge pages); their uses
    # beyond that are code no build produced (a JIT, machine code copied out of a library: anonymous or memfd
    # code the sampling can only count as a share) or memory the parent reads made unreadable or remapped
    r"|mmap(?:64)?|mremap|mprotect|pkey_\w+|remap_file_pages|memfd_create"
    r"|socket|socketpair|connect|bind|listen|accept4?|send(?:to|msg|mmsg)?|recv(?:from|msg|mmsg)?"  # networking
    r"|getaddrinfo\w*|gethostby\w+|getnameinfo"
    r"|setns|unshare|mount\w*|umount2?|chroot|pivot_root|(?:init|finit|delete)_module|reboot"  # the sandbox itself
    r"|libc_(?!single_threaded$)\w+"  # glibc's private entry points (__libc_system, __libc_fork, __libc_dlerror_result)
    r")(?:_chk)?")

# The CPython C API, for torch bindings (pybind's glue converts Python floats, ints and sequences with it): a
# class by the interpreter's reserved prefix (Py*, _Py*), less what runs, compiles or imports code, calls a
# Python callable (a torch function among them: the sampling would see that time in torch, but a kernel has no
# business calling back into Python) or controls the interpreter (initialisation, sys, tracing hooks, pending
# calls, fork hooks). Names the harness's own minimal binding imports are allowed whatever they are. Lean
# builds take pointers and numbers only: the Python C API is no part of them.
_PY_API = re.compile(r"_*Py\w+")
_PY_DENY = re.compile(
    r"_*(?:PyRun_|Py_Compile|PyEval_Eval|PyEval_Call|PyEval_Set(?:Trace|Profile)|PyImport_|PyCode_|PyUnstable_\w*Code"
    r"|PyFunction_(?:New|Vectorcall)|PyMarshal_|PySys_|PyConfig_|PyPreConfig_|PyInterpreterState_SetEvalFrameFunc"
    r"|Py_(?:Initialize|Finalize|NewInterpreter|EndInterpreter|Main|BytesMain|RunMain|AddPendingCall|MakePendingCalls)"
    r"|PyObject_(?:Call|Vectorcall|FastCall|MakeTpCall)|PyVectorcall_|PyCFunction_Call"
    r"|PyOS_(?!(?:v?snprintf|string_to_double|double_to_string|strtou?l|mystrn?icmp)$)"  # conversions only
    r")\w*")
_OPS_RE = re.compile(r"^at::_ops::(\w+?)(?:_(?:memory_format|int|Tensor|names|dim|using_ints|self_int|Dimname|"
                     r"default|out|dtype|other|layout|SymInt|symint|sizes|generator|Scalar|list))*::(?:call|redispatch)\(")
# c10 is allowed but for the dispatcher's lookup (Dispatcher::findSchema, OperatorHandle::call, OperatorEntry):
# an operator is called by name through at::_ops, never by a handle found at run time. Operator registration
# (TORCH_LIBRARY / TORCH_LIBRARY_IMPL: torch::Library, torch::CppFunction, the schema parser) only adds
# kernels: the one registered runs the solution's own code, and whatever it calls is sampled like any call.
_TORCH_OK = re.compile(
    r"^(?:c10::(?!Dispatcher::|impl::OperatorEntry|OperatorHandle)|caffe2::TypeMeta|at::TensorBase::|at::Tensor::(?:print|toString)"
    r"|at::(?:get_num_threads|get_thread_num|in_parallel_region|init_num_threads|internal::(?:lazy_init_num_threads|"
    r"invoke_parallel|_parallel_run|GRAIN_SIZE))|at::TensorIterator(?:Base|Config)?(?:::|$)|at::RecordFunction|at::NoGradGuard|at::AutoDispatchBelow|at::check|at::checkDim|at::checkSize"
    r"|at::(?:CPUGeneratorImpl|detail::getDefaultCPUGenerator)|at::ScalarTypeToString|at::toString|torch::autograd::"
    r"|at::TensorMaker::make_tensor\(|at::(?:from_blob|for_blob)\("  # a tensor over memory the kernel owns
    r"|torch::wrap_pybind_function|pybind11::|THP\w*|torch::utils::"
    r"|torch::(?:Library|CppFunction|detail::TorchLibraryInit)::|torch::jit::parseSchema(?:OrName)?\()")
# Sleef, the vector math library torch bundles: ATen's own vector header (at::vec::Vectorized<float>::exp) calls
# it from a binding, as a lean kernel calls libm or libmvec; its time is runtime in the attribution (torchsyms).
_SLEEF = re.compile(r"Sleef_\w+")
_STD_OK = re.compile(r"^(?:std::|__gnu_cxx::|operator new|operator delete|vtable for (?:std::|__cxxabiv1::|__gnu_cxx::)|"
                     r"typeinfo (?:name )?for (?:std::|__cxxabiv1::|__gnu_cxx::|c10::|char|int|long|float|double|void|bool|"
                     r"unsigned)|VTT for std::|guard variable for|__cxxabiv1::)")


_RET = re.compile(r"^(?:[\w:*&<>]+\s+)+?((?:c10|at|torch|std|pybind11|caffe2|__gnu_cxx|THP\w*)::.*)$")


_DATA = re.compile(r"^(?:vtable for |typeinfo for |typeinfo name for |VTT for |construction vtable for |guard variable for )")


def _strip_return_type(d: str) -> str:
    """``float* at::TensorBase::data_ptr<float>() const`` -> ``at::TensorBase::data_ptr<float>() const``;
    ``vtable for c10::TensorImpl`` -> ``c10::TensorImpl`` (class data is judged by its class's namespace)."""
    d = _DATA.sub("", d)
    m = _RET.match(d)
    return m.group(1) if m else d


def runtime_allowed(exports) -> frozenset:
    """Pure: of the names the runtime libraries export, those an extension may import (less the deny class)."""
    return frozenset(n for n in exports if not _LIBC_DENY.fullmatch(n))


def forbidden_imports(undefined: list[str], kind: str, demangled: dict[str, str], baseline: frozenset = frozenset(),
                      runtime: frozenset = frozenset()) -> list[str]:
    """Pure: the imports of an artefact that the allowlist refuses, readable (``kind``: c | torch;
    ``baseline``: the imports of the harness's own empty torch binding, allowed as they are; ``runtime``: the
    exports of the system's runtime libraries, libc included, allowed unless in the deny class)."""
    bad = []
    for n in undefined:
        if n in baseline:
            continue
        if _LIBC_DENY.fullmatch(n) or _PY_DENY.fullmatch(n):
            bad.append(n)  # before any list: a deny class is never allowed by another rule
            continue
        if n in runtime:
            continue
        d = demangled.get(n)
        if d is not None:
            d = _strip_return_type(d)
        if d is None:
            if n in _LIBC or _C_PATTERNS.fullmatch(n) or (kind == "torch" and (_PY_API.fullmatch(n) or _SLEEF.fullmatch(n))):
                continue
            bad.append(n)
            continue
        if _STD_OK.match(d):
            continue
        if kind == "torch" and (_OPS_RE.match(d) or _TORCH_OK.match(d)):
            continue  # through the dispatcher: the parent's sampling sees where that time goes
        bad.append(d)
    return sorted(set(bad))
