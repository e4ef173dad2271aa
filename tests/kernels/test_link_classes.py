"""Honest code the builder and the link-time allowlist must accept by class, not by name (redteam2 found each
refused): C compiled as C, IFUNC entry points with prototypes, libc as a library less a deny class, the
CPython C API under pybind's glue less code execution, and torch operator registration without the
dispatcher's lookup. The allowlist tests are pure (hand-written symbol lists, allowed and denied, so a rule
too wide or too narrow fails); the build tests compile small lean libraries (about a second each)."""

import pytest

from shiftkit.kernels import symbols
from shiftkit.kernels.build import (_compile_plan, _language_flags, _salt, _toolchain, build, parse_depfile, runtime_imports,
                                    torch_kernel_headers)
from shiftkit.kernels.backends import get_backend
from shiftkit.kernels.specs import BuildSpec, spec_from_load_c

# ----------------------------------------------------------------------------- libc: a library less a deny class

LIBC_OK = ["getenv", "secure_getenv", "strtoul", "pthread_create", "pthread_join", "sched_getaffinity", "qsort_r",
           "open", "fopen", "write", "sigaction", "madvise", "munmap", "kill", "waitpid", "environ", "stdout",
           "__libc_single_threaded", "__memcpy_chk", "setrlimit", "nice", "sched_setaffinity", "strtok_r"]
LIBC_DENIED = [
    "dlopen", "dlsym", "dladdr", "dlmopen", "dl_iterate_phdr", "_dl_find_object",  # dynamic loading
    "fork", "_Fork", "__fork", "vfork", "__vfork", "clone", "__clone", "clone3", "daemon", "forkpty",  # processes
    "execve", "execvp", "fexecve", "execveat", "posix_spawn", "posix_spawnp", "posix_spawn_file_actions_init",
    "system", "popen", "__libc_system", "__libc_fork", "__libc_dlerror_result",
    "syscall", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "prctl", "arch_prctl",
    "personality",
    "mmap", "mmap64", "__mmap", "mprotect", "__mprotect", "pkey_mprotect", "mremap", "remap_file_pages",
    "memfd_create",  # executable or remapped memory
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto", "sendmsg", "recv",
    "recvfrom", "__recv_chk", "getaddrinfo", "gethostbyname", "getnameinfo",  # networking
    "setns", "unshare", "mount", "umount2", "chroot", "init_module", "reboot",  # the sandbox itself
]
LIBC = frozenset(LIBC_OK + LIBC_DENIED + ["bindtextdomain", "sendfile"])  # what a libc exports (a sample)


def test_libc_is_allowed_as_a_library_less_its_deny_class():
    for kind in ("c", "torch"):
        assert symbols.forbidden_imports(LIBC_OK + ["bindtextdomain", "sendfile"], kind, {}, runtime=LIBC) == []
        assert symbols.forbidden_imports(LIBC_DENIED, kind, {}, runtime=LIBC) == sorted(LIBC_DENIED)
    assert symbols.runtime_allowed(LIBC) == frozenset(LIBC_OK + ["bindtextdomain", "sendfile"])
    # the class is the library's exports, not a pattern: a name the library does not export stays refused
    assert symbols.forbidden_imports(["getenv", "sched_getaffinity"], "c", {}) == ["getenv", "sched_getaffinity"]
    assert symbols.forbidden_imports(["cblas_sgemm", "sgemm_"], "c", {}, runtime=LIBC) == ["cblas_sgemm", "sgemm_"]


def test_only_the_harness_binding_overrides_the_deny_class():
    """The harness's own binding's imports are allowed as they are; no library set and no other rule allows a
    denied name."""
    assert symbols.forbidden_imports(["dlsym"], "torch", {}, baseline=frozenset({"dlsym"})) == []
    assert symbols.forbidden_imports(["dlsym", "PyRun_SimpleString"], "c", {},
                                     runtime=frozenset({"dlsym", "PyRun_SimpleString"})) == ["PyRun_SimpleString", "dlsym"]


def test_runtime_imports_hold_this_systems_libc_less_the_deny_class():
    rt = runtime_imports(60.0)
    assert {"getenv", "pthread_create", "sched_getaffinity", "open", "qsort_r", "stdout", "expf", "cexpf",
            "__cxa_throw_bad_array_new_length", "GOMP_parallel"} <= rt
    assert not {"dlopen", "dlsym", "fork", "vfork", "clone", "execve", "system", "popen", "syscall", "ptrace", "mmap",
                "mprotect", "socket", "connect", "process_vm_readv", "prctl", "__libc_system"} & rt
    assert not [n for n in rt if symbols._LIBC_DENY.fullmatch(n)]


# ----------------------------------------------------------------------------- the CPython C API (torch bindings)

PY_OK = ["PyFloat_AsDouble", "PyFloat_Type", "PyNumber_Check", "PyNumber_Float", "PyNumber_Index", "PyLong_AsLong",
         "PyLong_AsLongLong", "PyLong_FromLongLong", "PyIndex_Check", "PyErr_Occurred", "PyErr_Clear", "PyBool_Type",
         "_Py_TrueStruct", "_Py_Dealloc", "PySequence_Check", "PySequence_Size", "PyTuple_GetItem", "PyOS_snprintf",
         "PyOS_string_to_double", "PyEval_SaveThread", "PyEval_RestoreThread", "PyGILState_Ensure"]
PY_DENIED = ["PyRun_SimpleString", "PyRun_StringFlags", "Py_CompileString", "Py_CompileStringExFlags", "PyEval_EvalCode",
             "_PyEval_EvalFrameDefault", "PyEval_CallObjectWithKeywords", "PyEval_SetTrace", "PyEval_SetProfile",
             "PyImport_ImportModule", "PyImport_AddModule", "PyImport_ExecCodeModule", "PyCode_New", "PyCode_NewEmpty",
             "PyFunction_New", "_PyFunction_Vectorcall", "Py_Initialize", "Py_FinalizeEx", "Py_NewInterpreter",
             "Py_RunMain", "Py_AddPendingCall", "PySys_GetObject", "PySys_SetObject", "PyOS_AfterFork_Child",
             "PyOS_setsig", "PyMarshal_ReadObjectFromString", "PyObject_Call", "PyObject_CallObject",
             "PyObject_CallMethod", "_PyObject_CallMethod_SizeT", "PyObject_CallFunctionObjArgs", "PyObject_Vectorcall",
             "PyObject_VectorcallMethod", "_PyObject_MakeTpCall", "PyVectorcall_Call", "PyCFunction_Call",
             "_PyInterpreterState_SetEvalFrameFunc"]


def test_python_c_api_is_a_class_in_torch_bindings_less_code_execution():
    assert symbols.forbidden_imports(PY_OK, "torch", {}) == []
    assert symbols.forbidden_imports(PY_DENIED, "torch", {}) == sorted(PY_DENIED)
    assert symbols.forbidden_imports(PY_OK, "c", {}) == sorted(PY_OK)  # lean builds take pointers and numbers only
    # what pybind's own glue imports (in the harness's minimal binding) stays allowed whatever it is
    assert symbols.forbidden_imports(["PyObject_CallFunctionObjArgs"], "torch", {},
                                     frozenset({"PyObject_CallFunctionObjArgs"})) == []


# ----------------------------------------------------------------------------- torch operator registration

REG_OK = {
    "_Z1a": "torch::Library::Library(torch::Library::Kind, std::__cxx11::basic_string<char, std::char_traits<char>, "
            "std::allocator<char> >, std::optional<c10::DispatchKey>, char const*, unsigned int)",
    "_Z1b": "torch::Library::_def(c10::FunctionSchema&&, c10::OperatorName*, std::vector<torch::headeronly::Tag, "
            "std::allocator<torch::headeronly::Tag> > const&, torch::_RegisterOrVerify) &",
    "_Z1c": "torch::Library::_impl(char const*, torch::CppFunction&&, torch::_RegisterOrVerify) &",
    "_Z1d": "torch::CppFunction::~CppFunction()",
    "_Z1e": "torch::jit::parseSchema(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
            "const&, bool)",
    "_Z1f": "torch::jit::parseSchemaOrName(std::__cxx11::basic_string<char, std::char_traits<char>, "
            "std::allocator<char> > const&, bool)",
    "_Z1g": "torch::Library::~Library()",
    "_Z1h": "torch::detail::TorchLibraryInit::TorchLibraryInit(torch::Library::Kind, void (*)(torch::Library&), "
            "char const*, std::optional<c10::DispatchKey>, char const*, unsigned int)",
    "_Z1i": "c10::impl::cow::materialize_cow_storage(c10::StorageImpl&)",
}
REG_DENIED = {
    "_Z2a": "c10::Dispatcher::singleton()",
    "_Z2b": "c10::Dispatcher::findSchema(c10::OperatorName const&)",
    "_Z2c": "c10::Dispatcher::findSchemaOrThrow(char const*, char const*)",
    "_Z2d": "c10::OperatorHandle::callBoxed(std::vector<c10::IValue, std::allocator<c10::IValue> >*) const",
    "_Z2e": "c10::impl::OperatorEntry::reportError(c10::DispatchKey) const",
    "_Z2f": "torch::jit::load(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, "
            "std::optional<c10::Device>, bool)",
    "_Z2g": "torch::jit::Module::forward(std::vector<c10::IValue, std::allocator<c10::IValue> >, "
            "std::unordered_map<std::__cxx11::basic_string<char>, c10::IValue> const&)",
    "_Z2h": "at::cpu::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
    "_Z2i": "torch::jit::parseName(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
            "const&)",
}


def test_operator_registration_is_allowed_the_dispatchers_lookup_is_not():
    assert symbols.forbidden_imports(list(REG_OK), "torch", REG_OK) == []
    assert symbols.forbidden_imports(list(REG_DENIED), "torch", REG_DENIED) == sorted(REG_DENIED.values())
    assert symbols.forbidden_imports(list(REG_OK), "c", REG_OK) == sorted(REG_OK.values())  # lean: no torch at all


TI = {"_ZN2at18TensorIteratorBase8for_eachE": "at::TensorIteratorBase::for_each(c10::function_ref<void (char**, long "
        "const*, long, long)>, long)", "_ZN2at22TensorIteratorConfig5buildEv": "at::TensorIteratorConfig::build()",
      "_ZTIN2at14TensorIteratorE": "typeinfo for at::TensorIterator"}
TI_DENIED = {"_ZN2at6native3fooE": "at::native::foo(at::Tensor const&)", "_ZN2at3cpu2mmE": "at::cpu::mm(at::Tensor "
             "const&, at::Tensor const&)", "_ZN2at22TensorIteratorFooE": "at::TensorIteratorFoo::bar()"}


def test_tensoriterator_is_a_class_below_it_torch_kernels_are_not():
    """redteam7 hn15: TensorIterator (its config, its for_each over the binding's own lambda) is torch's loop
    framework, allowed as a class; its time in libtorch is torch's in the sampling. Kernels are not."""
    assert symbols.forbidden_imports(list(TI), "torch", TI) == []
    assert symbols.forbidden_imports(list(TI_DENIED), "torch", TI_DENIED) == sorted(TI_DENIED.values())


def test_depfile_names_every_header_and_torch_kernel_headers_are_found():
    """redteam7 h07: torch's kernels are refused where they enter a build, by header as by symbol. The depfile
    (-MD, the compiler's own account of every file it opened) is parsed by hand-computed rules: continued
    lines, escaped spaces, $$, several rules, targets dropped."""
    text = ("/tmp/b/unit0.o: /src/cpp_sources.cpp /r/inc/ATen/native/Math.h \\\n"
            " /r/inc/ATen/native/cpu/My\\ Kernel.h /src/a$$b.h\n\n/tmp/b/unit1.o: /src/b.c /r/inc/ATen/Parallel.h"
            " /r/inc/ATen/native/Math.h\n")
    deps = parse_depfile(text)
    assert deps == ["/src/cpp_sources.cpp", "/r/inc/ATen/native/Math.h", "/r/inc/ATen/native/cpu/My Kernel.h",
                    "/src/a$b.h", "/src/b.c", "/r/inc/ATen/Parallel.h"]
    assert torch_kernel_headers(deps, "/r/inc") == ["ATen/native/Math.h", "ATen/native/cpu/My Kernel.h"]
    assert torch_kernel_headers(deps, "/r/inc/", frozenset({"ATen/native/Math.h"})) == ["ATen/native/cpu/My Kernel.h"]
    assert torch_kernel_headers(["/r/inc/ATen/native/../native/cpu/K.h"], "/r/inc") == ["ATen/native/cpu/K.h"]
    assert torch_kernel_headers(["/src/ATen/native/cpu/K.h"], "/r/inc") == []  # the candidate's own file
    assert parse_depfile("") == [] and torch_kernel_headers([], "/r/inc") == []  # degenerate


def test_every_unit_writes_its_depfile_and_a_candidate_cannot_redirect_it():
    from shiftkit.kernels import static

    spec = BuildSpec(name="m", kind="c", backend="cpu", sources={"a.c": "", "b.cpp": ""})
    plan = _compile_plan(spec, ["a.c", "b.cpp"])
    for i, argv in enumerate(plan[:2]):
        assert argv[-3:] == ["-MD", "-MF", f"/tmp/b/unit{i}.d"]
    assert static.disallowed_flags(["-MMD", "-MD", "-MF", "-MT", "-M", "-MG", "-MP"]) == ["-MMD", "-MD", "-MF", "-MT",
                                                                                         "-M", "-MG", "-MP"]


# ----------------------------------------------------------------------------- C units are compiled as C


def test_language_flags_keep_each_languages_dialect():
    flags = ["-O3", "-std=c++17", "-fopenmp", "-std=gnu++20", "-march=native", "-std=c99", "-DX=1"]
    assert _language_flags(flags, True) == ["-std=gnu11", "-O3", "-fopenmp", "-march=native", "-std=c99", "-DX=1"]
    assert _language_flags(flags, False) == ["-O3", "-std=c++17", "-fopenmp", "-std=gnu++20", "-march=native", "-DX=1"]


def test_c_units_go_to_the_c_compiler_and_the_key_names_it():
    cxx, cc, ver = _toolchain()
    spec = BuildSpec(name="m", kind="c", backend="cpu", sources={"a.c": "", "b.cpp": "", "sub/c.c": ""})
    plan = _compile_plan(spec, ["a.c", "b.cpp", "sub/c.c"])
    assert [p[0] for p in plan] == [cc, cxx, cc, cxx]  # three units, then the link (by the C++ driver)
    for p in (plan[0], plan[2]):
        assert "-std=gnu11" in p and not [f for f in p if f.startswith("-std=c++") or f.startswith("-std=gnu++")]
    assert "-std=gnu11" not in plan[1] and "-std=c++17" in plan[1]
    assert cc in ver and cxx in ver and ver in _salt(get_backend("cpu"))


def test_fast_math_keeps_ieee_inf_and_nan_and_finite_math_is_refused_by_name():
    """-ffast-math is honoured except finite-math: the last flag of every C/C++ unit restores inf/NaN (redteam3
    hn04: a fast-math swish returned NaN where exp(-x) overflows); an explicit -ffinite-math-only is refused
    with its reason."""
    from shiftkit.kernels import static

    spec = BuildSpec(name="m", kind="c", backend="cpu", sources={"a.c": "", "b.cpp": ""}, extra_cflags=["-ffast-math"])
    for argv in _compile_plan(spec, ["a.c", "b.cpp"])[:2]:
        assert argv.index("-fno-finite-math-only") > argv.index("-ffast-math")
    # and no sibling calls, whatever the candidate asks (redteam8 hn01; the live check is in
    # tests/adversarial/test_attribution_classes.py)
    spec = BuildSpec(name="m", kind="c", backend="cpu", sources={"a.c": "", "b.cpp": ""},
                     extra_cflags=["-O3", "-foptimize-sibling-calls"])
    for argv in _compile_plan(spec, ["a.c", "b.cpp"])[:2]:
        assert argv.index("-fno-optimize-sibling-calls") > argv.index("-foptimize-sibling-calls") > argv.index("-O3")
    assert static.disallowed_flags(["-ffast-math", "-Ofast", "-fno-finite-math-only"]) == []
    assert static.disallowed_flags(["-ffinite-math-only"]) == ["-ffinite-math-only"]
    [f] = static.check_flags(["-ffinite-math-only"])
    assert f.code == "build_flag" and "refused: inf and NaN" in f.message


FAST_SWISH = r"""
#include <math.h>
#include <stdint.h>
void swish(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + expf(-x[i])); }
"""


def test_fast_math_build_returns_ieee_results_where_exp_overflows(tmp_path):
    """End to end through the real compiler: the fast-math build of x / (1 + exp(-x)) gives -0 (not NaN) at
    x = -100, where exp(100) is inf."""
    import ctypes

    import torch

    spec = BuildSpec(name="fast_swish", kind="c", backend="cpu", sources={"swish.c": FAST_SWISH},
                     extra_cflags=["-O3", "-ffast-math", "-march=native"])
    res = build(spec, cache_dir=str(tmp_path))
    assert res.ok, res.errors
    lib = ctypes.CDLL(res.so_path)
    x = torch.tensor([-100.0, -90.0, -1.0, 0.0, 3.0, 100.0] * 8)
    y = torch.empty_like(x)
    lib.swish(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_int64(x.numel()))
    assert torch.isfinite(y).all(), y
    torch.testing.assert_close(y, x * torch.sigmoid(x))


C11 = r"""
#include <stdint.h>
#include <stdlib.h>
_Static_assert(sizeof(int64_t) == 8, "int64_t");
struct pt { int x, y; };
static int twice(const int *restrict p) { return 2 * *p; }
int c_only(const float *restrict x, float *restrict y, int64_t n) {
    int *new = malloc(sizeof *new);   /* C: no cast from void*, and new/class are plain names */
    struct pt class = {.y = 2, .x = 1};
    *new = twice(&(int){class.x + class.y});
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (float)*new;
    free(new);
    return 0;
}
"""
GLUE = r"""
#include <cstdint>
extern "C" int c_only(const float* x, float* y, std::int64_t n);
extern "C" void from_cpp(const float* x, float* y, std::int64_t n) { c_only(x, y, n); }
"""


def test_a_c11_unit_builds_as_c_and_links_with_cpp_glue(tmp_path):
    r = build(spec_from_load_c({"name": "c11", "sources": {"k.c": C11, "glue.cpp": GLUE}}), tmp_path)
    assert r.ok, [e.message for e in r.errors]
    assert r.protos == {"c_only": ["ptr", "ptr", "i64"], "from_cpp": ["ptr", "ptr", "i64"]}
    assert r.returns == {"c_only": "i32", "from_cpp": "void"}
    bad = build(spec_from_load_c({"name": "cpp", "sources": {"k.cpp": C11}}), tmp_path)
    assert not bad.ok  # the same text as C++ is not valid: the test would pass without the C compiler otherwise


# ----------------------------------------------------------------------------- IFUNC entry points

IFUNCS = r"""
#include <cstdint>
extern "C" __attribute__((target_clones("avx2", "default")))
void clones(const float* x, float* y, std::int64_t n, double s) { for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * s; }

static void plain(float* y, std::int32_t n) { for (std::int32_t i = 0; i < n; ++i) y[i] += 1.f; }
extern "C" {
typedef void fn_t(float*, std::int32_t);
static fn_t* pick() { return plain; }
void by_hand(float* y, std::int32_t n) __attribute__((ifunc("pick")));
}
"""


def test_ifunc_exports_have_their_prototypes(tmp_path):
    r = build(spec_from_load_c({"name": "ifuncs", "source": IFUNCS}), tmp_path)
    assert r.ok, [e.message for e in r.errors]
    assert r.protos == {"clones": ["ptr", "ptr", "i64", "f64"], "by_hand": ["ptr", "i32"]}
    assert r.returns == {"clones": "void", "by_hand": "void"}


def test_ifunc_exports_are_callable(tmp_path):
    import torch

    from shiftkit.kernels.runtime import CLib

    r = build(spec_from_load_c({"name": "ifuncs", "source": IFUNCS}), tmp_path)
    lib = CLib(r.so_path, r.protos)
    x, y = torch.arange(5, dtype=torch.float32), torch.zeros(5)
    lib.clones(x, y, 5, 2.0)
    lib.by_hand(y, 5)
    assert y.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]


# ----------------------------------------------------------------------------- lean return values

RETURNS = r"""
#include <stdint.h>
#include <stdbool.h>
double mean(const float *x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; ++i) s += x[i]; return s / n; }
int64_t count_pos(const float *x, int64_t n) { int64_t c = 0; for (int64_t i = 0; i < n; ++i) c += x[i] > 0; return c; }
float first(const float *x) { return x[0]; }
bool any_neg(const float *x, int64_t n) { for (int64_t i = 0; i < n; ++i) if (x[i] < 0) return true; return false; }
struct pair { double a, b; };
struct pair both(double a) { struct pair p = {a, 2 * a}; return p; }
"""


def test_lean_functions_return_their_scalar(tmp_path):
    """A lean C function may return its result (redteam3 hn12: a reduction returning double): the call gives the
    value with the C type's meaning; a return type ctypes cannot carry (a struct) is an error naming it."""
    import torch

    from shiftkit.kernels.runtime import CLib

    r = build(spec_from_load_c({"name": "rets", "sources": {"r.c": RETURNS}}), tmp_path)
    assert r.ok, [e.message for e in r.errors]
    assert r.returns == {"mean": "f64", "count_pos": "i64", "first": "f32", "any_neg": "bool", "both": "<structure_type>"}
    lib = CLib(r.so_path, r.protos, r.returns)
    x = torch.tensor([1.5, -2.0, 4.0, 0.25])
    assert lib.mean(x, 4) == 0.9375 and lib.count_pos(x, 4) == 3 and lib.first(x) == 1.5
    assert lib.any_neg(x, 4) is True and lib.any_neg(x.abs(), 4) is False
    with pytest.raises(TypeError, match="structure_type"):
        lib.both(1.0)


def test_warning_flags_pass_and_pass_through_does_not():
    """redteam4 hn16 built with -Wshadow: every -W warning option passes (with no-, error=, a =value); the
    linker, assembler and preprocessor pass-through (-Wl, -Wa, -Wp, with a comma) never does, on either line."""
    from shiftkit.kernels import static
    ok = ["-Wshadow", "-Wall", "-Wextra", "-Werror", "-Werror=shadow", "-Wno-error=shadow", "-Wno-unused-variable",
          "-Wshadow=local", "-Wformat=2", "-Wconversion", "-Wdouble-promotion", "-Wc++-compat", "-Wno-unused"]
    assert static.disallowed_flags(ok) == []
    bad = ["-Wl,-rpath,/tmp", "-Wa,-x", "-Wp,-include,/etc/passwd", "-Wl,--wrap=expf", "-Wl,", "-W", "-Wl", "-Wa",
           "-Wp", "-Wshadow;id", "-W/tmp/x", "-Wshadow=/tmp/x", "-Wshadow,x", "-Werror=", "-W shadow"]
    assert static.disallowed_flags(bad) == bad
    # the link line takes the compile classes too (redteam6 hn03), warnings included; pass-through never
    assert static.disallowed_flags([], [], ["-Wshadow"]) == []
    assert static.disallowed_flags([], [], bad) == bad
