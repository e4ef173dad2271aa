"""Pure functions: flag allowlist, spec extraction, the symbol allowlist, sample attribution, comparisons,
tolerances, transforms, seeds, layouts, stats, rewards, metrics, parsers (no processes)."""

import math

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import correctness as C
from shiftkit.kernels import metrics, reward, shm, static, stats, symbols
from shiftkit.kernels.backends import get_backend
from shiftkit.kernels.blocking import is_allowed
from shiftkit.kernels.build import parse_compiler_output
from shiftkit.kernels.evaluate import coverage_verdict, foreign_verdict, judged_excess, spot_plan
from shiftkit.kernels.findings import CODES, Finding
from shiftkit.kernels.kernelbench import rewrite, scale_value, size_constants
from shiftkit.kernels.perf import classify_path, interpreter_path
from shiftkit.kernels.specs import extract_specs


def codes(fs):
    return {f.code for f in fs if f.severity == "error"}


# ----------------------------------------------------------------------------- flags, extraction, findings

def test_flag_allowlist():
    ok = ["-O3", "-march=native", "-mavx2", "-mfma", "-fopenmp", "-DTILE=64", "-std=c++17", "-Wno-unused", "-ffast-math",
          "-ffp-contract=off", "-pthread",  # -pthread: std::thread (redteam3 hn14)
          "-std=c++23", "-std=gnu++2b", "-std=c2x", "-std=iso9899:2011"]  # every dialect GCC names (redteam5 hn03)
    assert static.disallowed_flags(ok) == []
    bad = ["-O3; touch /tmp/x", "-fplugin=/tmp/x.so", "-I/etc", "-include/etc/passwd", "@/tmp/resp", "-Wl,-rpath,/tmp",
           "-specs=/tmp/s", "-B/tmp", "-o/tmp/x", "-DX=$(id)", "-Wa,-x", "--sysroot=/"]
    assert static.disallowed_flags(bad) == bad
    assert static.disallowed_flags([], ["--use_fast_math", "-arch=sm_90"], ["-fopenmp", "-lm", "-pthread", "-lpthread"]) == []
    assert static.disallowed_flags([], ["-ccbin=/tmp/cc"], ["-lcublas", "-L/tmp"]) == ["-ccbin=/tmp/cc", "-lcublas", "-L/tmp"]
    assert codes(static.check_flags(["-fplugin=x"])) == {"build_flag"}  # non-vacuity: the check flags a bad flag
    assert static.check_flags(ok) == []


def test_codegen_flags_pass_by_class_and_path_or_program_options_do_not():
    """Any -f/-m code-generation option passes (an honest '-fno-strict-aliasing' was refused by a name list);
    options that name a file, program or plugin, add a runtime, or change the target ABI are refused."""
    ok = ["-fno-strict-aliasing", "-fvisibility=hidden", "-fno-trapping-math", "-mprefer-vector-width=512",
          "-fno-semantic-interposition", "-falign-loops=32", "-mno-vzeroupper", "-fvect-cost-model=unlimited"]
    assert static.disallowed_flags(ok) == []
    bad = ["-fplugin=x", "-fplugin-arg-a=b", "-fdump-tree-all", "-fprofile-generate", "-fauto-profile=p",
           "-ffile-prefix-map=a=b", "-fsanitize=address", "-finstrument-functions", "-fuse-ld=lld", "-flto",
           "-m32", "-mcmodel=large", "-fno-pie", "-fsyntax-only", "-fvisibility=/tmp/x", "-fopt-info-all=x"]
    assert static.disallowed_flags(bad) == bad


def test_finding_codes_are_validated():
    with pytest.raises(ValueError, match="unknown finding code"):
        Finding("made_up", "x")
    assert Finding.from_dict(Finding("timeout", "t").to_dict()) == Finding("timeout", "t")


def test_extract_specs_resolves_static_literals():
    src = 'A = "int a;"\nB = A + "\\nint b;"\nfrom torch.utils.cpp_extension import load_inline\n' \
          'm = load_inline(name="e", cpp_sources=B, functions=["f"], extra_cflags=["-O3"])\n'
    specs, fs = extract_specs(src)
    assert fs == [] and len(specs) == 1
    s = specs[0]
    assert s.kind == "torch" and s.sources == {"cpp_sources.cpp": "int a;\nint b;"} and s.functions == ["f"]
    assert s.extra_cflags == ["-O3"]


def test_extract_specs_flags_dynamic_sources():
    specs, fs = extract_specs("import os\nfrom shiftkit.kernels.runtime import load_c\nlib = load_c(name='x', source=os.environ['S'])\n")
    assert specs == [] and [f.code for f in fs] == ["dynamic_sources"]
    specs, fs = extract_specs("from shiftkit.kernels.runtime import load_c\nlib = load_c(name='x', source='a' + 1)\n")
    assert specs == [] and [f.code for f in fs] == ["dynamic_sources"]  # only strings and lists add up
    assert [f.code for f in extract_specs("def f(:\n")[1]] == ["syntax_error"]


def test_spec_key_depends_on_content_only():
    a = extract_specs('from shiftkit.kernels.runtime import load_c\nlib = load_c(name="x", source="int a;")\n')[0][0]
    b = extract_specs('# other python\nfrom shiftkit.kernels.runtime import load_c\nlib = load_c(name="x", source="int a;")\n')[0][0]
    c = extract_specs('from shiftkit.kernels.runtime import load_c\nlib = load_c(name="x", source="int b;")\n')[0][0]
    assert a.key() == b.key() != c.key()


# ----------------------------------------------------------------------------- the compiler's output

def test_parse_compiler_output_keeps_only_the_solutions_files():
    text = ("/src/kernels/a.cpp:12:5: error: 'foo' was not declared in this scope\n"
            "In file included from x.h:1:\n"
            "cpp_sources:3:1: fatal error: bar.h: No such file or directory\n"
            "/usr/share/dict/words:1:1: error: 'aardvark' does not name a type\n"
            "/src/kernels/a.cpp:14:1: warning: unused\n")
    errs = parse_compiler_output(text)
    assert [(e.file, e.line, e.column) for e in errs] == [("kernels/a.cpp", 12, 5), ("cpp_sources", 3, 1)]
    assert errs[0].message == "'foo' was not declared in this scope"
    assert "aardvark" not in str(errs)  # a host file's contents never come back
    only_host = parse_compiler_output("/etc/hostname:1:1: error: 'vm' does not name a type\n")
    assert only_host[0].file is None and "vm" not in only_host[0].message
    link = parse_compiler_output("main.o: undefined reference to `g()'\ncollect2: error: ld returned 1 exit status")
    assert link and link[0].file is None and "undefined reference" in link[0].message


def test_parse_compiler_output_is_bounded():
    huge = "/src/source.cpp:" + "9" * 5000 + ":1: error: x\n"  # int(10**5000) would raise past Python's digit limit
    errs = parse_compiler_output(huge)
    assert all(e.line is None or e.line < 10**9 for e in errs)
    assert len(parse_compiler_output("/src/source.cpp:1:1: error: e\n" * 10_000)) == 50


# ----------------------------------------------------------------------------- the symbol allowlist

def test_symbol_allowlist_lean_kernels():
    ok = ["memcpy", "expf", "__expf_finite", "_ZGVdN8v_expf", "GOMP_parallel", "omp_get_thread_num", "malloc", "free",
          "__stack_chk_fail", "printf", "_ZdlPv", "_ZSt20__throw_length_errorPKc"]
    dem = {"_ZdlPv": "operator delete(void*)", "_ZSt20__throw_length_errorPKc": "std::__throw_length_error(char const*)"}
    assert symbols.forbidden_imports(ok, "c", dem) == []
    bad = ["sgemm_", "cblas_sgemm", "dlopen", "dlsym", "syscall", "PyRun_SimpleString", "fork", "execve", "open"]
    assert symbols.forbidden_imports(bad, "c", {}) == sorted(bad)


def test_runtime_libraries_are_allowed_by_library_not_by_name():
    """Every export of the system's libm, libstdc++, libgcc_s and libgomp is allowed (honest 'cexpf' and
    '__cxa_throw_bad_array_new_length' were refused by name lists); libc's deny class, BLAS and the interpreter are not."""
    from shiftkit.kernels.build import runtime_imports

    rt = runtime_imports(60.0)
    ok = ["cexpf", "cabsf", "clogf", "csqrtf", "fegetround", "__cxa_throw_bad_array_new_length", "expf", "GOMP_parallel"]
    assert symbols.forbidden_imports(ok, "c", {}, rt) == []
    assert symbols.forbidden_imports(["cexpf", "__cxa_throw_bad_array_new_length"], "c", {}) != []  # the list alone
    bad = ["sgemm_", "cblas_sgemm", "dlopen", "dlsym", "syscall", "PyRun_SimpleString", "fork", "execve", "mprotect"]
    assert symbols.forbidden_imports(bad, "c", {}, rt) == sorted(bad)


def test_symbol_allowlist_torch_bindings():
    dem = {
        "_ZN2at4_ops19empty_memory_format4callE": "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)",
        "_ZN2at4_ops4view4callE": "at::_ops::view::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>)",
        "_ZN2at4_ops2mm4callE": "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",
        "_ZN2at4_ops4relu4callE": "at::_ops::relu::call(at::Tensor const&)",
        "_ZN2at3cpu2mmE": "at::cpu::mm(at::Tensor const&, at::Tensor const&)",
        "_ZN2at6native3addE": "at::native::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
        "_ZNK2at10TensorBase8data_ptrIfEEPT_v": "float* at::TensorBase::data_ptr<float>() const",
        "_ZN3c106detail14torchCheckFailE": "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
        "_ZN3c1010Dispatcher9singletonEv": "c10::Dispatcher::singleton()",
        # torch::from_blob's out-of-line step: a tensor over the kernel's own memory (redteam5 hn29)
        "_ZN2at11TensorMaker11make_tensorEv": "at::Tensor at::TensorMaker::make_tensor()",
        "_ZN2at11TensorMaker7computeEv": "at::TensorMaker::compute()",  # not make_tensor: refused
    }
    got = symbols.forbidden_imports(list(dem) + ["PyRun_SimpleString", "PyTuple_New"], "torch", dem,
                                    frozenset({"PyTuple_New"}))
    assert got == sorted(["at::cpu::mm(at::Tensor const&, at::Tensor const&)", "c10::Dispatcher::singleton()",
                          "at::TensorMaker::compute()",
                          "at::native::add(at::Tensor const&, at::Tensor const&, c10::Scalar const&)", "PyRun_SimpleString"])


# ----------------------------------------------------------------------------- where the samples land

def test_classify_path():
    torch_dirs, py = ("/venv/site-packages/torch/",), ("/py/3.11/",)
    assert classify_path("/x/ext/0.so", True, torch_dirs, py) == "candidate"
    assert classify_path("/venv/site-packages/torch/lib/libtorch_cpu.so", False, torch_dirs, py) == "torch"
    assert classify_path("/venv/site-packages/torch/lib/libgomp-a34b3233.so.1", False, torch_dirs, py) == "runtime"
    assert classify_path("/usr/lib/x86_64-linux-gnu/libc.so.6", False, torch_dirs, py) == "runtime"
    assert classify_path("/usr/lib/x86_64-linux-gnu/libopenblas.so.0", False, torch_dirs, py) == "foreign"
    assert classify_path("/py/3.11/bin/python3.11", False, torch_dirs, py) == "runtime"
    assert classify_path("/py/3.11/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.so", False, torch_dirs, py) == "foreign"
    assert classify_path("/memfd:jit (deleted)", False, torch_dirs, py) == "foreign"
    assert classify_path("[vdso]", False, torch_dirs, py) == "runtime"


def test_foreign_verdict_hand_computed():
    assert foreign_verdict({"candidate": 70, "torch": 20, "runtime": 10}, 0.25) is None  # 20 % <= 25 %
    code, msg = foreign_verdict({"candidate": 60, "torch": 30, "runtime": 10}, 0.25)
    assert code == "torch_compute" and "30%" in msg
    assert foreign_verdict({"candidate": 10, "foreign": 80, "torch": 10}, 0.25)[0] == "foreign_compute"
    assert foreign_verdict({"torch": 10}, 0.25) is None  # too few samples to say anything


def test_interpreter_excess_hand_computed():
    """The candidate's interpreter samples beyond the allowance per round count as foreign: 100 samples over 10
    rounds at 4 per round leave 60; at or below the allowance nothing; no allowance measured (None): nothing."""
    assert judged_excess([10] * 10, 4.0) == 60
    assert judged_excess([4] * 10, 4.0) == 0 and judged_excess([1] * 10, 4.0) == 0
    assert judged_excess([10] * 10, None) == 0
    assert judged_excess([], 4.0) == 0  # degenerate: no rounds


def test_foreign_verdict_counts_interpreter_excess():
    """Pooled: 10 rounds of {candidate 5, runtime 5 (all interpreter)}: 50 interpreter samples. With eager's
    allowance of 4 per round the excess is 10 of 100 samples (10 %, passes); at 1 per round it is 40 (40 %:
    interpreter_compute). A window: the same excess confined to rounds 6-10 is caught there though the pooled
    share passes."""
    rounds = [{"candidate": 5, "runtime": 5}] * 10
    pooled = {"candidate": 50, "runtime": 50}
    interp = [5] * 10
    assert foreign_verdict(pooled, 0.25, rounds=rounds, interp=interp, interp_allow=4.0) is None
    code, msg = foreign_verdict(pooled, 0.25, rounds=rounds, interp=interp, interp_allow=1.0)
    assert code == "interpreter_compute" and "40%" in msg and "(40)" in msg
    assert foreign_verdict(pooled, 0.25, rounds=rounds, interp=interp, interp_allow=None) is None  # not judged
    # windowed: 40 rounds, interpreter-heavy only in the last 10 (60 interpreter samples of 80 in each)
    rounds = [{"candidate": 80}] * 30 + [{"candidate": 20, "runtime": 60}] * 10
    interp = [0] * 30 + [60] * 10
    pooled = {"candidate": 2600, "runtime": 600}
    assert foreign_verdict(pooled, 0.25, rounds=rounds, interp=interp, interp_allow=2.0) is not None
    v = foreign_verdict(pooled, 0.25, rounds=rounds, interp=interp, interp_allow=2.0)
    assert v[0] == "interpreter_compute" and "in round 31" in v[1]
    with pytest.raises(ValueError):
        foreign_verdict(pooled, 0.25, rounds=rounds, interp=[1], interp_allow=2.0)


def test_rounds_under_the_op_blocker_are_not_judged_for_the_interpreter():
    """CI (stop 30): an honest ctypes kernel's correctness rounds run under the worker's op blocker, a Python
    dispatch mode the eager party never runs under, so their interpreter time is mostly the harness's (a cold
    first one put 37 % in the interpreter). Such a round (None) keeps its interpreter samples as runtime and earns
    no allowance; judged, the same rounds are interpreter compute."""
    rounds = [{"candidate": 20, "runtime": 60}] * 10 + [{"candidate": 70, "runtime": 10}] * 30
    pooled = {"candidate": 2300, "runtime": 900}
    blocked = [None] * 10 + [10] * 30
    assert foreign_verdict(pooled, 0.25, rounds=rounds, interp=blocked, interp_allow=8.0) is None
    v = foreign_verdict(pooled, 0.25, rounds=rounds, interp=[60] * 10 + [10] * 30, interp_allow=8.0)
    assert v is not None and v[0] == "interpreter_compute" and "in round 1 of 40" in v[1], v
    assert judged_excess(blocked, 8.0) == 60  # 30 judged rounds x (10 - 8); the blocked ones earn nothing
    assert judged_excess([None] * 3, 8.0) == 0 and judged_excess([], None) == 0
    assert judged_excess([5, 9], 4.0) == 6  # 14 - 2 x 4


def test_interpreter_path_is_exact():
    py = ("/py/3.11/",)
    assert interpreter_path("/py/3.11/lib/libpython3.11.so.1.0", py)
    assert interpreter_path("/py/3.11/bin/python3.11", py)
    assert interpreter_path("/py/3.11/lib/python3.11/lib-dynload/_struct.cpython-311-x86_64-linux-gnu.so", py)
    assert interpreter_path("/usr/lib/x86_64-linux-gnu/libffi.so.8.1.2", py)
    assert not interpreter_path("/usr/lib/x86_64-linux-gnu/libc.so.6", py)  # the C runtime is not the interpreter
    assert not interpreter_path("/py/3.11/lib/python3.11/lib-dynload/audioop.cpython-311-x86_64-linux-gnu.so", py)
    assert not interpreter_path("/tmp/libpython3.11.so.1.0", py)


def test_coverage_verdict_hand_computed():
    # 100 ms of CPU at a 50 us period should give 2000 samples
    assert coverage_verdict(1900, 100_000_000, 50) is None
    assert coverage_verdict(601, 100_000_000, 50) is None  # 30 % is the bound
    assert "2000" in coverage_verdict(100, 100_000_000, 50)  # sampling disabled or evaded
    assert coverage_verdict(0, 1_000_000, 50) is None  # too little CPU time to say anything


# ----------------------------------------------------------------------------- correctness

def test_compare_is_scale_aware_hand_computed():
    e = torch.tensor([3.0, -4.0])  # rms = sqrt((9 + 16) / 2) = 3.5355
    bound1 = 1e-4 * 3.5355 + 1e-4 * 3.0  # element 0: 6.54e-4
    assert C.compare(e, e + torch.tensor([0.9 * bound1, 0.0]))[0] is None
    code, msg, d = C.compare(e, e + torch.tensor([1.1 * bound1, 0.0]))
    assert code == "output_mismatch" and "1/2" in msg and d == pytest.approx(1.1 * bound1, rel=1e-3)
    # a softmax-like output ~1e-3: an absolute 1e-4 used to hide a 10 % error; now it does not
    p = torch.full((1000,), 1e-3)
    assert C.compare(p, p * 1.1)[0] == "output_mismatch"
    assert C.compare(p, p * (1 + 5e-5))[0] is None
    # the same relative error passes at every scale
    for s in (1e-6, 1.0, 1e6):
        assert C.compare(e * s, (e + torch.tensor([0.9 * bound1, 0.0])) * s)[0] is None


def test_compare_nan_inf_and_exact_types():
    e = torch.tensor([1.0, 2.0, float("nan"), float("inf")])
    assert C.compare(e, e.clone())[0] is None
    assert C.compare(e, torch.tensor([1.0, 2.0, 0.0, float("inf")]))[0] == "output_mismatch"  # NaN is no wildcard
    assert C.compare(e, torch.tensor([1.0, 2.0, float("nan"), 1e30]))[0] == "output_mismatch"
    assert C.compare(torch.tensor([1.0, 2.0]), torch.tensor([float("nan"), 2.0]))[0] == "output_mismatch"

    class Sub(torch.Tensor):
        pass

    t = torch.ones(2)
    assert C.compare(t, t.as_subclass(Sub))[0] == "output_type"
    assert C.compare(t, torch.ones(3))[0] == "output_type"
    assert C.compare(t, torch.ones(2, dtype=torch.float64))[0] == "output_type"
    assert C.compare((t, t), [t, t])[0] == "output_type"
    assert C.compare({"a": t}, {"a": t})[0] is None
    assert C.compare(torch.tensor([1, 2]), torch.tensor([1, 3]))[0] == "output_mismatch"


def test_fp64_budget_rejects_fp32_compute_and_accepts_fp64_rounding():
    x = torch.randn(4096, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = torch.exp(x)
    assert C.compare(ref, torch.exp(x.float()).double())[0] == "output_mismatch"  # computed in fp32
    assert C.compare(ref, ref * (1 + 1e-14))[0] is None  # fp64 rounding differences


def test_complex_outputs_have_a_budget_and_compare_by_magnitude():
    z = torch.complex(torch.randn(64), torch.randn(64))
    assert C.compare(z, z * (1 + 1e-6))[0] is None  # was compared bit-exactly
    assert C.compare(z, z * (1 + 1e-2))[0] == "output_mismatch"
    assert C.tolerance_for("complex64") == C.tolerance_for("float32")
    assert C.tolerance_for("complex128") == C.tolerance_for("float64")


def test_tolerance_presets():
    assert C.tolerance_for("float32") == (1e-4, 1e-4)
    assert C.tolerance_for("float32", "cuda_agent") == (1e-2, 1e-2)
    assert C.tolerance_for("float16") == (1e-2, 1e-2)
    assert C.tolerance_for("float32", atol=0.5) == (0.5, 1e-4)
    assert C.tolerance_for("float32", reduced_precision=True) == C.tolerance_for("bfloat16")
    assert C.tolerance_for("int64") == (0.0, 0.0)
    with pytest.raises(ValueError, match="valid"):
        C.tolerance_for("float32", "loose")


def test_a_leaf_gets_its_rounding_noise_as_absolute_slack():
    """redteam10 hn19: ``C.leaf_noise`` is the rms over draws of each Python-float leaf's own rounding error
    (reference minus its float64 twin, hand-computed), and ``compare`` adds the slack to the leaf's relative
    budget: by path from ``leaf_slack``, or the round's own from a float at the leaf's place in ``scales``."""
    outs = [(torch.zeros(2), 4e-10, {"m": 2.0}), (torch.zeros(2), -2e-10, {"m": 2.0 + 1e-6})]
    outs64 = [(torch.zeros(2), 1e-19, {"m": 2.0}), (torch.zeros(2), 0.0, {"m": 2.0 + 1e-6})]
    got = C.leaf_noise(outs, outs64)
    assert got["out[1]"] == pytest.approx(math.sqrt(((4e-10) ** 2 + (2e-10) ** 2) / 2))
    assert got["out[2]['m']"] == 0.0  # sensitive but exactly rounded: no slack (a float64 leaf gets none)
    assert C.leaf_noise(outs, [None, None]) == {"out[1]": 0.0, "out[2]['m']": 0.0}  # degenerate: no float64 twin
    assert C.leaf_noise([], []) == {}
    e, a = (torch.zeros(2), 1e-10, {"m": 2.0}), (torch.zeros(2), 9e-10, {"m": 2.0})
    assert C.compare(e, a, leaf_dtype="float32")[0] == "output_mismatch"  # relative only: 8e-10 > 2e-4 * 1e-10
    assert C.compare(e, a, leaf_dtype="float32", leaf_slack={"out[1]": 1e-9})[0] is None
    assert C.compare(e, a, leaf_dtype="float32", leaf_slack={"out[2]['m']": 1e-9})[0] == "output_mismatch"  # by path
    sc = C.with_leaf_slack([None, None, {"m": None}], e, {"out[1]": 1e-9})
    assert sc == [None, 1e-9, {"m": None}]
    assert C.compare(e, a, leaf_dtype="float32", scales=sc)[0] is None  # the round's own slack


def test_float8_outputs_get_one_step_of_their_format():
    """redteam10 hn17: float8 had no preset, so a float8 output was compared exactly; a kernel scaling by a
    reciprocal differs by one e4m3 step at a rounding midpoint. One step of the format (its eps), in every preset;
    a floating dtype no rule names is an error, not an exact comparison."""
    for preset in C.TOLERANCE_PRESETS:
        assert C.tolerance_for("float8_e4m3fn", preset) == (0.125, 0.125)
        assert C.tolerance_for("float8_e5m2", preset) == (0.25, 0.25)
    f8 = torch.float8_e4m3fn  # rms 0.25: budget 0.125 * 0.25 + 0.125 * |e| (1.0: 0.156; 0.0: 0.031)
    e = torch.zeros(16).to(f8)
    e[0] = 1.0
    one_step, two_steps = e.clone(), e.clone()
    one_step[0], one_step[1] = 1.125, 2.0 ** -9  # one step up; the smallest subnormal
    two_steps[0] = 1.25
    assert C.compare(e, one_step)[0] is None
    assert C.compare(e, two_steps)[0] == "output_mismatch"
    assert C.compare(e, e)[0] is None  # degenerate: equal
    with pytest.raises(ValueError, match="float4_e2m1fn_x2"):
        C.tolerance_for("float4_e2m1fn_x2")
    assert C.tolerance_for("float4_e2m1fn_x2", atol=0.5, rtol=0.5) == (0.5, 0.5)  # named by the caller: honoured


def test_float8_outputs_rounded_otherwise_on_many_elements_fail():
    """redteam12 h05: a truncating float8 encoder is one step low on about half the elements, each within its
    one-step budget. More than 5% (+8) of a float8 output rounded otherwise than the reference is a biased
    quantiser; an honest kernel's boundary cases (a reciprocal for a division: ~1e-5 of them; double rounding
    through float16: ~1 in 128) pass."""
    f8 = torch.float8_e4m3fn
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g) * 100
    e = x.to(f8)  # round to nearest even
    # truncation towards zero: where rounding went away from zero, step back one toward zero
    bits = e.view(torch.uint8).to(torch.int16)
    away = e.float().abs() > x.abs()
    trunc = torch.where(away & (bits & 0x7F > 0), bits - 1, bits).to(torch.uint8).view(f8)
    n_off = C.rounded_otherwise(e, trunc)
    assert 1000 < n_off < 3000  # about half
    assert C.compare(e, trunc)[0] == "output_mismatch" and "rounded otherwise" in C.compare(e, trunc)[1]
    idx = torch.nonzero(trunc.float() != e.float()).flatten()

    def some(k):
        y = e.clone().view(torch.uint8)
        y[idx[:k]] = trunc.view(torch.uint8)[idx[:k]]
        return y.view(f8)
    assert C.compare(e, some(212))[0] is None  # 212 of 4096 (<= 5% + 8): boundary cases' budget
    assert C.compare(e, some(213))[0] == "output_mismatch"
    assert C.rounded_otherwise(e, e) == 0 and C.rounded_otherwise(x, x + 1) == 0  # degenerate; not float8
    z = torch.tensor([0.0, float("nan")]).to(f8)
    assert C.rounded_otherwise(z, torch.tensor([-0.0, float("nan")]).to(f8)) == 0  # -0 is 0, NaN is NaN


def test_transforms():
    x = [torch.tensor([1.0, -2.0, 3.0, 4.0]), torch.tensor([1, 2]), 3]
    assert torch.equal(C.transform(x, "negate", 0)[0], -x[0]) and torch.equal(C.transform(x, "negate", 0)[1], x[1])
    assert C.transform(x, "negate", 0)[2] == 3
    assert torch.equal(C.transform(x, "scale_up", 0)[0], x[0] * 32) and torch.equal(C.transform(x, "scale_down", 0)[0], x[0] / 32)
    sp = C.transform([torch.ones(10_000)], "sparse", 1)[0]
    assert 0.4 < float((sp == 0).float().mean()) < 0.6 and torch.equal(sp, C.transform([torch.ones(10_000)], "sparse", 1)[0])
    assert C.all_discrete(torch.tensor([1])) and not C.all_discrete((torch.tensor([1]), torch.ones(1)))
    assert C.finite_where(torch.tensor([1.0, float("inf")]), torch.tensor([1.0, float("inf")]))
    assert not C.finite_where(torch.tensor([float("inf")]), torch.tensor([1.0]))


def test_domain_transforms_hand_computed():
    x = [torch.tensor([1.0, -2.0]), torch.tensor([5, -6], dtype=torch.int64), torch.tensor([7], dtype=torch.int32)]
    assert torch.equal(C.transform(x, "scale_up", 0, 4.0)[0], torch.tensor([4.0, -8.0]))
    assert torch.equal(C.transform(x, "scale_tiny", 0)[0], torch.tensor([2.0 ** -12, -(2.0 ** -11)]))
    w = C.transform(x, "int_wide", 3)
    assert torch.equal(w[0], x[0])  # floats untouched; int32 is moved by 2^16 (test_int_wide_every_integer_dtype)
    assert torch.equal((w[1] - x[1]).abs(), torch.tensor([2 ** 32, 2 ** 32])) and w[1].dtype == torch.int64
    assert torch.equal(w[1], C.transform(x, "int_wide", 3)[1])  # a pure function of the seed
    assert C.SCALE_UP_LADDER[0] == C.SCALE and list(C.SCALE_UP_LADDER) == sorted(C.SCALE_UP_LADDER, reverse=True)
    assert C.has_int64(x) and not C.has_int64([torch.ones(2)])


def test_perturb_changes_exactly_n_elements_and_degenerate_cases():
    base, fresh = torch.zeros(100), torch.ones(100)
    out = C.perturb([base, torch.tensor([1, 2])], [fresh, torch.tensor([9, 9])], seed=5, n=8)
    changed = int((out[0] != base).sum())
    assert 1 <= changed <= 8 and torch.equal(out[1], torch.tensor([1, 2]))  # positions may repeat; ints untouched
    assert torch.equal(out[0], C.perturb([base], [fresh], seed=5, n=8)[0]) and torch.equal(base, torch.zeros(100))
    nc = torch.zeros(4, 6).t()  # not contiguous: written back into the clone
    o = C.perturb([nc], [torch.ones(6, 4)], seed=1, n=100)[0]
    assert o.shape == (6, 4) and 12 < int((o == 1).sum()) <= 24 and bool((nc == 0).all())  # 100 draws with repeats
    assert C.perturb([torch.zeros(0)], [torch.zeros(0)], seed=1)[0].numel() == 0
    assert torch.equal(C.perturb([base], [torch.ones(5)], seed=1)[0], base)  # shapes differ: untouched


def test_float_leaf_budget_follows_the_reference_dtype():
    assert C.leaf_dtype_of([torch.ones(2)], [torch.ones(1, dtype=torch.float16)]) == "float32"
    assert C.leaf_dtype_of([torch.ones(2, dtype=torch.float64)]) == "float64"
    assert C.leaf_dtype_of([torch.tensor([1])], 3.0) == "float64"  # no float tensor: float64
    assert C.leaf_dtype_of([torch.ones(2, dtype=torch.complex64)]) == "float32"
    e, a = 0.5, 0.5 * (1 + 1e-6)  # a float32-accurate mean
    assert C.compare(e, a, leaf_dtype="float32")[0] is None
    assert C.compare(e, a)[0] == "output_mismatch"  # the float64 budget (default) is 1e-10
    assert C.compare(e, 0.5 * (1 + 1e-3), leaf_dtype="float32")[0] == "output_mismatch"
    assert C.compare((torch.ones(1), e), (torch.ones(1), a), leaf_dtype="float32")[0] is None  # nested


def test_leaf_measured_dtype_hand_computed():
    """The tightest budget (atol + rtol of a dtype, times |e|) that covers 8 x |e - e64|."""
    assert C.measured_dtype(1.0, 1.0) == "float64"  # no error: the float64 budget (2e-10)
    assert C.measured_dtype(1.0, 1.0 + 1e-6) == "float32"  # 8e-6 <= 2e-4
    assert C.measured_dtype(1.0, 1.0 + 1e-4) == "float16"  # 8e-4 > 2e-4, <= 2e-2
    assert C.measured_dtype(-1.0, -1.003) == "bfloat16"  # 0.024 > 0.02, <= 0.04
    assert C.measured_dtype(1.0, 2.0) == "bfloat16"  # nothing covers it: the loosest
    assert C.measured_dtype(1.0, 1.0 + 2e-5, safety=10.0) == "float32" and C.measured_dtype(1.0, 1.0 + 3e-5) == "float16"
    # degenerate: no float64 twin, a non-finite one, a zero leaf
    assert C.measured_dtype(1.0, None) is None and C.measured_dtype(1.0, math.nan) is None
    assert C.measured_dtype(math.inf, math.inf) is None
    assert C.measured_dtype(0.0, 0.0) == "float64" and C.measured_dtype(0.0, 1e-30) == "bfloat16"


def test_leaf_source_dtype_hand_computed():
    assert C.source_dtype(0.5, [("float64", 3.0), ("float32", 0.5)]) == "float32"  # the tensor it was read from
    assert C.source_dtype(0.5, [("bfloat16", 0.5), ("float32", 0.5)]) == "float32"  # the last read of its value
    assert C.source_dtype(0.25, [("float32", 0.5), ("bfloat16", 1.0), ("float64", 2.0)]) == "bfloat16"  # computed: loosest
    assert C.source_dtype(1.0, []) is None and C.source_dtype(1.0, [("int64", 1.0)]) is None


def test_leaf_dtypes_hold_the_leaf_to_the_precision_the_reference_computed():
    """The class (redteam4 h05): bfloat16 inputs, a leaf read from a float32 tensor: float32, not the inputs'
    bfloat16; a reduced-precision step the source dtype hides is measured; no float64 twin: the old rule."""
    t = torch.ones(2)
    # the leaf read from a float32 tensor, float64 twin equal (an explicit .float() inside): float32
    assert C.leaf_dtypes([(t, 0.5)], [(t, 0.5)], [("float32", 0.5)], "bfloat16") == {"out[1]": "float32"}
    # read from float32, but 0.3 % off its float64 twin over the trials (a bf16 step inside): bfloat16
    assert C.leaf_dtypes([1.0, 2.0], [1.0, 2.006], [("float32", 1.0)], "float32") == {"out": "bfloat16"}
    # read from float64 with a float32-accurate twin difference: the measurement loosens it to float32
    assert C.leaf_dtypes([1.0], [1.0 + 1e-6], [("float64", 1.0)], "float64") == {"out": "float32"}
    # no source (a leaf from Python arithmetic on ints, or tolist): the widest input dtype stands in for it
    assert C.leaf_dtypes([{"m": 1.0}], [{"m": 1.0}], [], "float32") == {"out['m']": "float32"}
    # no float64 twin (the reference raises in float64): the looser of the source and the widest input dtype
    assert C.leaf_dtypes([0.5], [None], [("float32", 0.5)], "bfloat16") == {"out": "bfloat16"}
    assert C.leaf_dtypes([0.5], [None], [("float32", 0.5)], "float64") == {"out": "float32"}
    # degenerate: no float leaf, no trials
    assert C.leaf_dtypes([(t, 3)], [(t, 3)], [], "float32") == {} and C.leaf_dtypes([], [], [], "float32") == {}
    # compare takes the per-leaf mapping by path
    e, a = (t, 0.5), (t, 0.5 * (1 + 1e-3))
    assert C.compare(e, a, leaf_dtype={"out[1]": "float32"})[0] == "output_mismatch"
    assert C.compare(e, a, leaf_dtype={"out[1]": "bfloat16"})[0] is None
    assert C.compare(e, (t, 0.5 * (1 + 1e-6)), leaf_dtype={"out[1]": "float32"})[0] is None


def test_scalar_sources_records_the_dtypes_read_as_python_numbers():
    x = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    out, seen = C.scalar_sources(lambda v: (v.float().pow(2).mean().item(), float(v.sum()), int(v.long().sum())), x)
    assert out == (2.5, 3.0, 3) and seen == [("float32", 2.5), ("bfloat16", 3.0)]  # integers not recorded
    assert C.scalar_sources(lambda v: v * 2, x)[1] == []
    assert C.scalar_sources(lambda v: v.to(torch.complex64).sum().item(), torch.ones(2))[1] == [("float32", 2 + 0j)]
    # downcasts recorded with no value (an op whose output is narrower than its widest floating input)
    _, seen = C.scalar_sources(lambda v: v.float().mul(2).bfloat16().float().sum().item(), torch.ones(2, dtype=torch.float64))
    assert seen == [("float32", None), ("bfloat16", None), ("float32", 4.0)], seen
    assert C.leaf_dtypes([4.0], [4.0], seen, "float64") == {"out": "bfloat16"}  # the twin casts too: recorded
    assert C.source_dtype(4.0, seen) == "float32"


def test_spot_plan_covers_every_transform_at_secret_positions():
    kinds = 7
    plans = [spot_plan(10, b, kinds, seed=100 + b) for b in range(3)]
    assert all(len(p) == 5 and all(0 <= q < 15 for q in p) for p in plans)  # half as many as the natural rounds, added
    assert set().union(*[set(p.values()) for p in plans]) == set(range(kinds))  # two blocks cover all 7
    assert spot_plan(10, 0, kinds, 1) == spot_plan(10, 0, kinds, 1)
    assert {tuple(sorted(spot_plan(10, 0, kinds, s))) for s in range(20)} != {tuple(sorted(spot_plan(10, 0, kinds, 0)))}
    assert spot_plan(10, 0, 0, 1) == {} and spot_plan(0, 0, 3, 1) == {}
    assert list(spot_plan(1, 0, 3, 1).values()) == [0] and set(spot_plan(1, 0, 3, 1)) <= {0, 1}
    assert len(spot_plan(10, 0, 2, 1)) == 2


def test_derive_seed_needs_the_secret_and_is_per_round():
    a = C.derive_seed(123, 42, "timed", 0)
    assert a == C.derive_seed(123, 42, "timed", 0) and 0 <= a < 2**63
    assert len({C.derive_seed(123, 42, "timed", i) for i in range(1000)}) == 1000
    assert a != C.derive_seed(124, 42, "timed", 0) and a != C.derive_seed(123, 42, "trial", 0)


def test_degeneracy():
    assert C.degeneracy(torch.zeros(4) + 5e-5, 1e-4, 1e-4) == "all_zero"
    assert C.degeneracy(torch.full((4,), 3.0), 1e-4, 1e-4) == "constant"
    assert C.degeneracy(torch.tensor([1.0, 2.0]), 1e-4, 1e-4) is None
    assert C.degeneracy(torch.tensor(0.0), 1e-4, 1e-4) is None  # scalar losses are never degenerate
    assert C.same_outputs(torch.ones(3), torch.ones(3) + 1e-6, 1e-4, 1e-4)
    assert not C.same_outputs(torch.ones(3), torch.zeros(3), 1e-4, 1e-4)


def test_layouts():
    x = [torch.ones(3), (torch.zeros(2, 2, dtype=torch.float64), 7), {"b": torch.ones(1)}]
    lay, n = shm.layout(x)
    assert n == 3 * 64 and [lf["off"] for lf in shm.leaves(lay)] == [0, 64, 128]
    assert lay["items"][1]["t"] == "tuple" and lay["items"][1]["items"][1] == {"t": "value", "v": 7}
    assert shm.nbytes(x) == n
    with pytest.raises(TypeError, match="unsupported"):
        shm.layout([object()])


def test_blocking_allowlist():
    assert is_allowed("aten", "empty_like") and is_allowed("aten", "view") and is_allowed("mylib", "fused")
    assert not is_allowed("aten", "relu") and not is_allowed("aten", "mm") and not is_allowed("prims", "add")


def test_blocker_allows_dtype_conversion_as_data_movement():
    """redteam8 hn12/hn14: ``w.float()`` and ``pos.to(torch.int32)`` in forward are conversions (``aten._to_copy``),
    as ``copy_`` into another dtype is; arithmetic still raises, naming the op."""
    import torch

    from shiftkit.kernels.blocking import BlockedOpError, make_blocker

    h, i = torch.ones(4, dtype=torch.float16), torch.arange(4)
    with make_blocker() as b:
        assert h.float().dtype == torch.float32 and i.to(torch.int32).dtype == torch.int32
        assert h.to(torch.float64).dtype == torch.float64 and i.double().dtype == torch.float64
        with pytest.raises(BlockedOpError, match="aten.add"):
            h + 1
    assert dict(b.violations) == {"aten.add": 1}


def test_reply_header_schema():
    from shiftkit.kernels.sandbox import header_problem

    assert header_problem({"reply_to": "round", "ok": True, "nonce": 3, "violations": {"aten.mul": 2}, "values": [1.5]}) is None
    assert header_problem({"x-unknown": [1]}) is None
    assert "violations" in header_problem({"violations": [1, 2]})
    assert "violations" in header_problem({"violations": {"aten.mul": "2"}})
    assert "nonce" in header_problem({"nonce": "7"}) and "nonce" in header_problem({"nonce": True})
    assert "values" in header_problem({"values": [[1]]})


# ----------------------------------------------------------------------------- stats, rewards, metrics

def test_stats_hand_computed():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert stats.median(xs) == 2.5 and stats.quantile(xs, 0.25) == 1.75 and stats.iqr(xs) == 1.5
    assert stats.cv([2.0, 2.0]) == 0.0 and stats.cv([1.0, 3.0]) == 0.5
    s = stats.summarize([1e6, 3e6])
    assert s == {"median_ms": 2.0, "iqr_ms": 1.0, "min_ms": 1.0, "max_ms": 3.0, "n": 2}
    assert stats.speedup(4.0, 2.0) == 2.0 and stats.speedup(None, 1.0) is None and stats.speedup(1.0, 0.0) is None
    with pytest.raises(ValueError):
        stats.median([])


def test_milestone_reward():
    assert reward.milestone_reward(False, 9.0, 9.0) == (-1.0, "incorrect")
    assert reward.milestone_reward(True, 1.05, 2.0)[0] == 1.0  # 1 - 1/1.05 = 4.8% < 5%
    assert reward.milestone_reward(True, 1.06, 1.0)[0] == 2.0  # 5.7% > 5%
    assert reward.milestone_reward(True, 2.0, 1.06)[0] == 3.0
    assert reward.milestone_reward(True, None, None)[0] == 1.0
    assert reward.milestone_reward(True, 2.0, None)[0] == 2.0
    r, why = reward.milestone_reward(True, 2.0, 1.5)
    assert r == 3.0 and "2.00x" in why and "1.50x" in why
    assert reward.faster(1.0 / 0.95 + 1e-9) and not reward.faster(1.0 / 0.95 - 1e-9)


def test_log_speedup_reward():
    assert reward.log_speedup_reward(True, 2.0, 4.0)[0] == pytest.approx(math.log(2.0))
    assert reward.log_speedup_reward(True, 2.0, 4.0, baseline="compile")[0] == pytest.approx(math.log(4.0))
    assert reward.log_speedup_reward(True, 2.0, 0.5, baseline="best")[0] == pytest.approx(math.log(0.5))
    assert reward.log_speedup_reward(True, 1.0, 1.0)[0] == 0.0
    assert reward.log_speedup_reward(True, 1e9, None)[0] == 3.0
    assert reward.log_speedup_reward(False, 2.0, 2.0) == (-1.0, "incorrect")
    with pytest.raises(ValueError, match="valid"):
        reward.get_reward_fn("speed")


def test_set_metrics_hand_computed():
    rs = [
        {"correct": True, "speedup_eager": 2.0, "speedup_compile": 1.0, "reward": 2.0},
        {"correct": True, "speedup_eager": 8.0, "speedup_compile": 2.0, "reward": 3.0},
        {"correct": False, "speedup_eager": None, "speedup_compile": None, "reward": -1.0},
        {"correct": True, "speedup_eager": 0.5, "speedup_compile": 0.25, "reward": 1.0},
    ]
    m = metrics.set_metrics(rs)
    assert m["pass_rate"] == 0.75 and m["faster_than_eager_rate"] == 0.5 and m["faster_than_compile_rate"] == 0.25
    assert m["geomean_speedup_eager"] == pytest.approx(2.0)
    assert m["geomean_speedup_compile"] == pytest.approx(0.5 ** (1 / 3))
    assert m["fast_0"] == 0.75 and m["fast_1"] == 0.5 and m["fast_2"] == 0.25 and m["mean_reward"] == 1.25
    assert metrics.set_metrics([])["pass_rate"] == 0.0 and metrics.geomean([]) is None
    assert metrics.fast_p([True, True], [1.0, 1.0], 1.0) == 0.0


# ----------------------------------------------------------------------------- importer and registries

KB = '''import torch
batch_size = 4096
input_shape = (4096,)
dim = 1
reduce_dim = 1
name = "x"
N = 2048 * 2
'''


def test_size_constants_and_rewrite():
    c = size_constants(KB)
    assert {k: v for k, (_, _, v) in c.items()} == {"batch_size": 4096, "input_shape": (4096,), "N": 4096}
    assert scale_value(4096, 1 / 8) == 512 and scale_value((4096, 3), 1 / 8) == (512, 3) and scale_value(20, 1e-6) == 1
    out = rewrite(KB, {"batch_size": 512, "N": 64}, "# h\n", "ORIGINAL_SIZES = {}\n")
    assert out.startswith("# h\n") and "batch_size = 512\n" in out and "N = 64\n" in out and "dim = 1\n" in out
    assert out.endswith("ORIGINAL_SIZES = {}\n")


def test_registries_raise_listing_valid_names():
    with pytest.raises(ShiftkitError, match="valid backends: cpu, cuda$"):
        get_backend("rocm")
    assert get_backend("cpu").available()[0]


def test_cuda_fixtures_extract_on_cpu():
    from shiftkit.kernels import load_solution
    from shiftkit.kernels.fixtures import ROOT

    ok = load_solution(ROOT / "cuda" / "scale_shift_clamp_correct.py")
    (spec,) = ok.specs
    assert spec.backend == "cuda" and spec.kind == "torch" and set(spec.sources) == {"cpp_sources.cpp", "cuda_sources.cu"}
    assert codes(ok.findings) == set()


def test_cuda_backend_unavailable_is_a_clean_user_error():
    from shiftkit.kernels import EvalConfig, evaluate
    from shiftkit.kernels.fixtures import PROBLEMS, ROOT

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ShiftkitError, match="not available here"):
        evaluate(PROBLEMS / "scale_shift_clamp.py", ROOT / "cuda" / "scale_shift_clamp_correct.py",
                 EvalConfig(backend="cuda"))


def test_every_finding_code_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "kernels.md").read_text()
    missing = [c for c in CODES if f"`{c}`" not in doc]
    assert not missing, missing


def test_int_wide_every_integer_dtype_hand_computed():
    """Every integer dtype (bool excluded) of b bits is moved by 2^(b/2), one sign per tensor, clamped to the
    dtype's range below 64 bits; int64 by 2^32 as before."""
    x = [torch.tensor([7, -3], dtype=torch.int32), torch.tensor([100, -100], dtype=torch.int8),
         torch.tensor([0, 250], dtype=torch.uint8), torch.tensor([1000], dtype=torch.int16),
         torch.tensor([True, False]), torch.tensor([0.5])]
    w = C.transform(x, "int_wide", 11)
    assert C.int_offset(torch.int32) == 2 ** 16 and C.int_offset(torch.int8) == 16 and C.int_offset(torch.int64) == 2 ** 32
    d32 = (w[0].long() - x[0].long()).tolist()
    assert d32 in ([65536, 65536], [-65536, -65536]) and w[0].dtype == torch.int32
    assert w[1].tolist() in ([116, -84], [84, -116]) and w[1].dtype == torch.int8  # +-16 (no clamp needed here)
    assert w[2].tolist() in ([16, 255], [0, 234]) and w[2].dtype == torch.uint8  # clamped to 0..255
    assert w[3].tolist() in ([1256], [744])
    assert torch.equal(w[4], x[4]) and torch.equal(w[5], x[5])  # bool and floats untouched
    sat = C.transform([torch.tensor([127, -128], dtype=torch.int8)], "int_wide", 11)[0]
    assert set(sat.tolist()) <= {127, -128, 111, -112}  # never wraps: clamped at the dtype's range
    assert torch.equal(w[0], C.transform(x, "int_wide", 11)[0])  # a pure function of the seed
    assert C.has_int([torch.ones(1), torch.tensor([1], dtype=torch.uint8)]) and not C.has_int([torch.tensor([True])])
    assert C.applies("int_wide", [torch.tensor([1], dtype=torch.int16)]) and not C.applies("int_wide", [torch.ones(2)])
    assert C.transform([torch.zeros(0, dtype=torch.int32)], "int_wide", 1)[0].numel() == 0  # degenerate: empty


def test_shift_transform_hand_computed_and_degenerate():
    """x + s * c, c the power of two nearest factor * rms(x); an all-zero tensor moves by factor."""
    x = torch.tensor([1.0, -1.0, 1.0, -1.0])  # rms 1
    y = C.transform([x], "shift", 3, 16.0)[0]
    assert torch.equal(y - x, torch.full((4,), 16.0)) or torch.equal(y - x, torch.full((4,), -16.0))
    z = C.transform([3.0 * x], "shift", 3, 4.0)[0]  # rms 3: 4 * 3 = 12 -> 16 (nearest power of two)
    assert torch.equal((z - 3.0 * x).abs(), torch.full((4,), 16.0))
    zero = C.transform([torch.zeros(3)], "shift", 1, 2.0)[0]
    assert torch.equal(zero.abs(), torch.full((3,), 2.0))  # degenerate: rms 0 -> offset factor * 1
    assert C.transform([torch.zeros(0)], "shift", 1)[0].numel() == 0
    ints = torch.tensor([1, 2])
    assert torch.equal(C.transform([ints], "shift", 1)[0], ints)  # integers untouched
    assert C.ladder("shift", [x]) == C.SHIFT_LADDER and list(C.SHIFT_LADDER) == sorted(C.SHIFT_LADDER, reverse=True)
    assert C.applies("shift", [torch.ones(2, dtype=torch.complex64)])  # complex too since redteam8 h07


def test_ties_transform_hand_computed_and_degenerate():
    """Rounded to the grid q = the power of two nearest rms(x): exact ties, a handful of values."""
    x = torch.tensor([0.3, 0.9, 1.2, -1.6, 2.6, 0.0])  # rms ~1.38 -> q = 1
    assert torch.equal(C.transform([x], "ties", 0)[0], torch.tensor([0.0, 1.0, 1.0, -2.0, 3.0, 0.0]))
    big = torch.tensor([96.0, 100.0, -50.0, 0.0])  # rms ~70.8 -> q = 64
    assert torch.equal(C.transform([big], "ties", 0)[0], torch.tensor([128.0, 128.0, -64.0, 0.0]))
    r = C.transform([torch.randn(64, 512)], "ties", 0)[0]
    assert len(torch.unique(r)) <= 16 and int((r == r.amax(dim=1, keepdim=True)).sum(dim=1).min()) >= 1
    assert torch.equal(C.transform([torch.zeros(4)], "ties", 0)[0], torch.zeros(4))  # degenerate: rms 0
    inf = torch.tensor([1.0, float("inf")])
    assert torch.equal(C.transform([inf], "ties", 0)[0], inf)  # non-finite values stay


def test_scale_up_ladder_follows_the_widest_float_dtype():
    assert C.ladder("scale_up", [torch.ones(2)]) == C.SCALE_UP_LADDER
    wide = C.ladder("scale_up", [torch.ones(2), torch.ones(2, dtype=torch.float64)])
    assert wide[0] == 1024.0 and list(wide) == sorted(wide, reverse=True) and wide[-len(C.SCALE_UP_LADDER):] == C.SCALE_UP_LADDER
    assert C.ladder("scale_up", [torch.tensor([1])]) == C.SCALE_UP_LADDER  # no float tensor (degenerate)
    assert torch.equal(C.transform([torch.tensor([2.0], dtype=torch.float64)], "scale_up", 0, 1024.0)[0],
                       torch.tensor([2048.0], dtype=torch.float64))
    assert C.ladder("negate", [torch.ones(1)]) == (None,)


def test_perturb_params_hand_computed_and_degenerate():
    """p + 0.5 * rms(p) * randn (rms 1 where p is all zero), from the seed, in name order; ints untouched."""
    ones, zeros, idx = torch.ones(1000), torch.zeros(1000), torch.tensor([1, 2])
    out = C.perturb_params({"w": ones, "b": zeros, "i": idx}, 7)
    assert torch.equal(out["i"], idx) and out["w"].dtype == torch.float32
    assert 0.4 < float((out["w"] - 1).std()) < 0.6 and 0.4 < float(out["b"].std()) < 0.6  # zero bias: scale 1 * 0.5
    g = torch.Generator().manual_seed(7)  # hand-computed: the draws in name order (b, then w)
    nb = torch.randn(1000, generator=g, dtype=torch.float64)
    assert torch.equal(out["b"], (0.5 * nb).float())
    assert torch.equal(out["w"], C.perturb_params({"w": ones, "b": zeros}, 7)["w"])  # pure in the seed
    assert not torch.equal(out["w"], C.perturb_params({"w": ones, "b": zeros}, 8)["w"])
    big = C.perturb_params({"w": torch.full((1000,), 10.0)}, 1)["w"]
    assert 4.0 < float((big - 10).std()) < 6.0  # scale-aware: 0.5 * rms 10
    e = C.perturb_params({"empty": torch.zeros(0)}, 1)["empty"]
    assert e.numel() == 0 and torch.equal(ones, torch.ones(1000))  # degenerate; inputs never modified


def test_perturb_buffers_hand_computed_and_degenerate():
    """By the values, never by name: an all-zero buffer (a running mean at init) + 0.5 * randn; any other buffer
    times exp(0.5 * randn) element by element, one element in 16 also times 2^-16 (a near-dead channel; redteam9
    h10): a running variance stays positive, zeros, signs and infinities (a 0/-inf mask) are kept. Drawn from the
    seed in name order; integer buffers untouched."""
    mean, var, mask = torch.zeros(4), torch.ones(4), torch.tensor([0.0, 1.0, -2.0, -math.inf])
    steps = torch.tensor(3)  # num_batches_tracked
    out = C.perturb_buffers({"running_mean": mean, "running_var": var, "mask": mask, "steps": steps}, 5)
    g = torch.Generator().manual_seed(5)  # name order: mask, running_mean, running_var
    n_mask = torch.randn(4, generator=g, dtype=torch.float64)
    q_mask = torch.rand(4, generator=g, dtype=torch.float64) < 1 / 16  # one element in 16 also x 2^-16
    n_mean = torch.randn(4, generator=g, dtype=torch.float64)  # all zero: additive, no quiet draw
    n_var = torch.randn(4, generator=g, dtype=torch.float64)
    q_var = torch.rand(4, generator=g, dtype=torch.float64) < 1 / 16
    quiet = lambda q: torch.where(q, 2.0 ** -16, 1.0)  # noqa: E731
    assert torch.equal(out["running_mean"], (0.5 * n_mean).float())
    assert torch.equal(out["running_var"], (torch.exp(0.5 * n_var) * quiet(q_var)).float())
    assert bool((out["running_var"] > 0).all())
    m = mask.double() * torch.exp(0.5 * n_mask) * quiet(q_mask)
    assert torch.equal(out["mask"], m.float())
    big = C.perturb_buffers({"v": torch.ones(4096)}, 3)["v"]  # near-dead channels: ~1/16 of them, ~2^-16
    assert 150 < int((big < 2.0 ** -12).sum()) < 370 and float(big[big < 2.0 ** -12].max()) < 2.0 ** -13
    assert out["mask"][0] == 0 and out["mask"][1] > 0 and out["mask"][2] < 0 and out["mask"][3] == -math.inf
    assert out["steps"] is steps and torch.equal(mean, torch.zeros(4)) and torch.equal(var, torch.ones(4))
    assert not torch.equal(out["running_var"], C.perturb_buffers({"running_var": var}, 6)["running_var"])
    e = C.perturb_buffers({"empty": torch.zeros(0)}, 1)["empty"]  # degenerate
    assert e.numel() == 0
    h = C.perturb_buffers({"v": torch.ones(3, dtype=torch.float16)}, 1)["v"]
    assert h.dtype == torch.float16 and bool((h > 0).all()) and not bool((h == 1).all())


def test_draw_variants_reach_every_remainder_mod_8_and_every_tail_block_mod_32():
    """redteam6 h04: every global the declared variants vary is seen at every remainder mod 8 of its default
    (one variant per residue, each global in its own order), never onto a declared value or the default, never
    below 1. redteam7 h05: the move's whole 8-blocks are distinct (0..7 where the default allows), both sides
    of a move on the same remainder mod 64, so the tail mod 32 lands in every 8-block at least once."""
    declared = [{"batch_size": 5}, {"dim": 1001}]
    for seed in range(20):
        vs = C.draw_variants({"batch_size": 64, "dim": 2048}, declared, seed)
        assert len(vs) == 7 and all(set(v) == {"batch_size", "dim"} for v in vs)
        for k, d in (("batch_size", 64), ("dim", 2048)):
            assert sorted((v[k] - d) % 8 for v in vs) == list(range(1, 8))  # every non-zero remainder once
            assert all(v[k] not in (5, 1001, d) and abs(v[k] - d) <= d // 2 + 8 for v in vs)
        assert len({((v["dim"] - 2048) % 64) // 8 for v in vs}) == 7  # distinct blocks mod 64 (J = 7)
        assert {((v["dim"] - 2048) % 32) // 8 for v in vs} == {0, 1, 2, 3}  # every tail block mod 32
        assert len({((v["batch_size"] - 64) % 40) // 8 for v in vs}) == 5  # J = 64 // 16 = 4: blocks 0..4
    # the h05 kernel (wrong when the tail mod 32 is 8..24 and not a multiple of 8) is wrong on some variant
    for seed in range(50):
        tails = [v["dim"] % 32 for v in C.draw_variants({"dim": 1024}, [{"dim": 2048}], seed)]
        assert any(8 <= t <= 24 and t % 8 for t in tails)
    a = C.draw_variants({"batch_size": 64, "dim": 2048}, declared, 3)
    assert a == C.draw_variants({"batch_size": 64, "dim": 2048}, declared, 3)  # pure in the seed
    small = C.draw_variants({"n": 1}, [{"n": 2}], 0)
    assert all(v["n"] >= 1 and v["n"] not in (1, 2) for v in small) and len(small) == 6  # 1 + 1 = 2 is declared
    assert all(1 <= v["n"] - 1 <= 7 for v in small)  # J = 0 for a default of 1: moves of 1..7 only
    assert C.draw_variants({"n": 4}, [], 0) == [] and C.draw_variants({"s": "a"}, [{"s": "b"}], 0) == []  # degenerate


# ----------------------------------------------------------------------------- strided outputs (redteam5 hn24)

def test_strided_runs_hand_computed_and_refusals():
    from shiftkit.kernels import shm

    # padded rows: 3 rows of 5 floats, leading dimension 8: span 2*8 + 5 = 21, runs of 5 at 0, 8, 16
    assert shm.strided_runs([3, 5], [8, 1], 4) == (21, [0, 8, 16], 5)
    # a transpose is dense, one run over the whole span, but the parent would do the layout work: read only where
    # the reference's own output is that view (redteam7 h02, h03)
    assert shm.strided_runs([4, 6], [1, 4], 8, view=[1, 4]) == (24, [0], 24)
    with pytest.raises(shm.BadOutputLayout, match="permuted view"):
        shm.strided_runs([4, 6], [1, 4], 8)
    with pytest.raises(shm.BadOutputLayout, match="permuted view"):
        shm.strided_runs([4, 6], [1, 4], 8, view=[6, 1])  # the reference is row-major
    # an expand() view where the reference's output is one: the stride-0 dimension is read once
    assert shm.strided_runs([4, 5], [0, 1], 4, view=[0, 1]) == (5, [0], 5)
    with pytest.raises(shm.BadOutputLayout, match="stride 0"):
        shm.strided_runs([4, 5], [1, 0], 4, view=[0, 1])  # another dimension than the reference's
    assert shm.memory_order([2, 3, 4], [12, 1, 3]) == ((0, 2, 1), ())
    assert shm.memory_order([2, 1, 4], [0, 7, 1]) == ((2,), (0,))  # degenerate: size-1 dims do not count
    # every other element (span 2x): runs of one
    assert shm.strided_runs([4], [2], 4) == (7, [0, 2, 4, 6], 1)
    assert shm.strided_runs([0, 5], [5, 1], 4) == (0, [], 0)  # empty
    assert shm.strided_runs([1, 5], [999, 1], 4) == (5, [0], 5)  # a size-1 dimension's stride does not matter
    for shape, st in (([4, 5], [0, 1]), ([4, 5], [1, 1]), ([4, 5], [3, 1]), ([4, 5], [5]), ([4, 5], [5, -1]),
                      ([4, 5], [5.0, 1]), ([256, 64], [64 * 40, 1])):
        try:
            shm.strided_runs(shape, st, 4)
        except shm.BadOutputLayout:
            continue
        raise AssertionError((shape, st))  # expand, overlap, wrong rank or type, too sparse: all refused
    assert shm.strided_runs([2048], [16], 4)[0] == 2047 * 16 + 1  # one float per 64-byte slot: 128 KiB, read (hn12)
    starts = shm.strided_runs([5000, 3], [4, 1], 4)[1]
    assert not isinstance(starts, list) and starts.numel() == 5000  # many runs: a tensor, pages computed in bulk


def test_run_pages_match_the_elements_pages():
    import torch

    from shiftkit.kernels import shm

    P = shm.PAGE
    for shape, st, itemsize, addr in (([3, 5], [8, 1], 4, P - 8), ([5000, 3], [4, 1], 4, 12), ([9, 2], [512, 1], 8, 0),
                                      ([2, 1100], [1200, 1], 4, 3 * P - 4)):
        span, starts, run = shm.strided_runs(shape, st, itemsize)
        want = set()
        idx = torch.zeros(1, dtype=torch.int64)
        for n, s in zip(shape, st):
            idx = (idx[:, None] + torch.arange(n)[None, :] * s).reshape(-1)
        for e in idx.tolist():
            a = addr + e * itemsize
            want |= {a // P, (a + itemsize - 1) // P}
        assert shm.run_pages(addr, starts, run, itemsize) == want, (shape, st)


def test_reply_strides_are_validated():
    from shiftkit.kernels.sandbox import header_problem

    assert header_problem({"addrs": [4096], "strides": [None]}) is None
    assert header_problem({"addrs": [4096], "strides": [[8, 1]]}) is None
    assert header_problem({"strides": [[-1]]}) and header_problem({"strides": [["x"]]})
    assert header_problem({"strides": "8,1"}) and header_problem({"strides": [[True]]})


def test_round_entry_is_forward_for_every_party_unless_hooks_run():
    """redteam5 h06: a round calls the module's forward itself (no nn.Module.__call__ dispatch in any party's
    window, so rebinding __call__ trims nothing); the module where hooks are registered, and for torch.compile."""
    import torch

    from shiftkit.kernels.worker import entry

    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    m = M()
    M.__call__ = lambda self, x: x - 1  # a rebound __call__ is never what a round calls
    try:
        e = entry(m, "candidate")
        assert e == m.forward and float(e(torch.zeros(1))) == 1.0
        assert entry(m, "reference") == m.forward
        assert entry(m, "compile") is m
        h = m.register_forward_hook(lambda mod, i, o: o * 10)
        assert entry(m, "candidate") is m
        h.remove()
        g = torch.nn.modules.module.register_module_forward_pre_hook(lambda mod, i: None)
        assert entry(m, "candidate") is m  # a global hook: the module's own call path, as model(x) would run it
        g.remove()
        assert entry(m, "candidate") == m.forward
    finally:
        del M.__call__


# ----------------------------------------------------------------------------- static sources (redteam6 hn12-14)

def test_sources_fold_pure_string_expressions_over_literals():
    from shiftkit.kernels import specs

    src = (
        "import textwrap\nimport torch.nn as nn\nfrom shiftkit.kernels.runtime import load_c\n"
        "CHUNK = 64\nHDR = '#include <cstdint>'\n"
        "A = textwrap.dedent(\"\"\"\n    int a() { return 1; }\n\"\"\")\n"
        "B = f\"{HDR}\\n#define CHUNK {CHUNK}\\n#define EPS {1e-5:.1e}\\n\"\n"
        "C = '#define N %d\\n' % 7 + '{x}'.format(x='int c;')\n"
        "a = load_c(name='a', source=A)\nb = load_c(name='b', source=B, extra_cflags=['-O3'])\n"
        "c = load_c(name='c', source=C.strip())\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        src = r'int d(void) { return 4; }'\n        self.lib = load_c(name='d', source=src)\n")
    got, findings = specs.extract_specs(src)
    assert findings == [], findings
    by = {sp.name: sp.sources["source.cpp"] for sp in got}
    assert by["a"] == "\nint a() { return 1; }\n"
    assert by["b"] == "#include <cstdint>\n#define CHUNK 64\n#define EPS 1.0e-05\n"
    assert by["c"] == "#define N 7\nint c;" and by["d"] == "int d(void) { return 4; }"
    bad = ("import torch.nn as nn\nfrom shiftkit.kernels.runtime import load_c\n"
           "def make():\n    return 'int x;'\n"
           "def f(flag):\n    s = 'a'\n    s = 'b'\n    return load_c(name='x', source=s)\n"  # bound twice
           "y = load_c(name='y', source=make())\n"  # the solution's own code: not folded
           "z = load_c(name='z', source=open('k.cpp').read())\n"
           "def g(src):\n    return load_c(name='w', source=src)\n")  # a parameter
    got, findings = specs.extract_specs(bad)
    assert got == [] and len(findings) == 4 and {f.code for f in findings} == {"dynamic_sources"}, findings


def test_sources_through_a_helper_augmented_and_split_after_redteam7():
    """redteam7 hn10 (a helper passing its parameters to load_c), hn14 (``SRC +=`` at module level), hn16 (flags
    from ``"...".split()``): one spec per call of the helper, each argument a literal at its call site."""
    from shiftkit.kernels import specs

    src = ("import torch.nn as nn\nfrom shiftkit.kernels.runtime import load_c\n"
           "SRC = '#include <cstdint>\\n'\nSRC += 'int a;'\nFLAGS = '-O3 -funroll-loops'.split()\n"
           "def _build(name, src, flags=FLAGS):\n    return load_c(name=name, source=src, extra_cflags=flags)\n"
           "one = _build('one', SRC)\ntwo = _build(name='two', src=SRC + ' int b;', flags=['-O2'])\n"
           "class ModelNew(nn.Module):\n    def _mk(self, n, s):\n        return load_c(name=n, source=s)\n"
           "    def __init__(self):\n        super().__init__()\n        self.lib = self._mk('three', 'int c;')\n")
    got, findings = specs.extract_specs(src)
    assert findings == [], findings
    by = {sp.name: (sp.sources["source.cpp"], sp.extra_cflags) for sp in got}
    assert by == {"one": ("#include <cstdint>\nint a;", ["-O3", "-funroll-loops"]),
                  "two": ("#include <cstdint>\nint a; int b;", ["-O2"]), "three": ("int c;", [])}
    bad = ("from shiftkit.kernels.runtime import load_c\nimport os\n"
           "def _build(name, src):\n    return load_c(name=name, source=src)\n"
           "a = _build('a', open('k.cpp').read())\n")  # a helper called with a non-literal: still dynamic
    got, findings = specs.extract_specs(bad)
    assert got == [] and [f.code for f in findings] == ["dynamic_sources"]


def test_sources_rebound_in_order_in_a_class_body_and_flag_strings_after_redteam8():
    """redteam8 hn17 (``SRC = textwrap.dedent(SRC)``: the right side reads the previous binding), hn18 (the source
    and the load_c call in the class body, which runs in order over the module's names), hn20 (one flag string
    ``"-O3 -march=native"``: torch's ninja line splits it, so the spec does too)."""
    from shiftkit.kernels import specs

    src = ("import textwrap\nimport torch.nn as nn\nfrom shiftkit.kernels.runtime import load_c\n"
           "SRC = '\\n    int a;\\n'\nSRC = textwrap.dedent(SRC)\nA = load_c(name='a', source=SRC)\nSRC = 'int z;'\n"
           "class ModelNew(nn.Module):\n    K = 'int k;'\n    K = K + ' int j;'\n"
           "    lib = load_c(name='k', source=K, extra_cflags=['-O3 -march=native'])\n"
           "    def forward(self, x):\n        return x\n")
    got, findings = specs.extract_specs(src)
    assert findings == [], findings
    by = {sp.name: (sp.sources["source.cpp"], sp.extra_cflags) for sp in got}
    assert by == {"a": ("\nint a;\n", []), "k": ("int k; int j;", ["-O3", "-march=native"])}, by
    assert specs.spec_from_load_inline({"name": "x", "extra_cflags": ["-O3 -DX='a b'"]}, "cpu").extra_cflags == \
        ["-O3", "-DX=a b"]  # the shell's rules: the quoted value stays one flag (the allowlist then refuses it)
    bad = ("from shiftkit.kernels.runtime import load_c\nclass M:\n    S = 'int a;'\n"
           "    def f(self):\n        return load_c(name='m', source=S)\n")  # a method does not see the class's S
    got, findings = specs.extract_specs(bad)
    assert got == [] and [f.code for f in findings] == ["dynamic_sources"]


def test_flags_after_redteam6():
    ok = ["-DEPS=1e-5", "-DALPHA=-0.5", "-fcf-protection=none"]
    assert static.disallowed_flags(ok) == []
    assert static.disallowed_flags([], [], ["-march=native", "-O3", "-fopenmp", "-ffast-math", "-mavx2"]) == []
    bad_ld = ["-fplugin=x.so", "-Wl,-rpath,/tmp", "-L/tmp", "-lcrypto", "-ffinite-math-only", "-fuse-ld=gold"]
    assert static.disallowed_flags([], [], bad_ld) == bad_ld
    assert static.disallowed_flags(["-DX=$(id)", "-DX=a b"]) == ["-DX=$(id)", "-DX=a b"]


def test_input_region_is_matched_by_device_and_inode(tmp_path):
    """redteam7 h10: a file the worker made with the memfd's inode number on another device was exempt from the
    written-page proof; the match takes (device, inode), never the inode number alone."""
    import mmap
    import os

    from shiftkit.kernels.sandbox import input_ranges

    fd = os.memfd_create("sk-test-input")
    try:
        os.ftruncate(fd, 8192)
        with mmap.mmap(fd, 8192) as m:
            st = os.fstat(fd)
            lo = next(int(x.split("-")[0], 16) for x in open("/proc/self/maps") if f" {st.st_ino} " in x and "memfd" in x)
            assert (lo, lo + 8192) in input_ranges(st, "/proc/self/maps")
            m[0] = 1
        dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
        fake = tmp_path / "maps"
        fake.write_text(f"7f0000000000-7f0000002000 rw-s 00000000 {dev} {st.st_ino}   /memfd:x (deleted)\n"
                        f"7f0000010000-7f0000012000 rw-s 00000000 fe:07 {st.st_ino}   /tmp/same-inode\n")
        assert input_ranges(st, str(fake)) == [(0x7F0000000000, 0x7F0000002000)]
    finally:
        os.close(fd)


def test_positional_state_only_where_shapes_match_in_order():
    """redteam8 hn15: parameters renamed are loaded by position, only where count, shapes and dtypes match."""
    from shiftkit.kernels.worker import positional_state

    ref = {"proj.weight": torch.ones(3, 2), "proj.bias": torch.zeros(3)}
    assert positional_state(ref, {"proj.weight": torch.empty(3, 2), "proj.bias": torch.empty(3), "scratch": torch.empty(1)}) is ref
    got = positional_state(ref, {"w": torch.empty(3, 2), "b": torch.empty(3)})
    assert list(got) == ["w", "b"] and got["w"] is ref["proj.weight"] and got["b"] is ref["proj.bias"]
    assert positional_state(ref, {"b": torch.empty(3), "w": torch.empty(3, 2)}) is ref  # another order: by name
    assert positional_state(ref, {"w": torch.empty(3, 2)}) is ref  # one missing: the load names it
    assert positional_state(ref, {"w": torch.empty(3, 2, dtype=torch.float64), "b": torch.empty(3)}) is ref
    assert positional_state({}, {}) == {}  # degenerate


def test_state_the_reference_never_reads_need_not_be_held():
    """redteam10 hn21: an eval-mode BatchNorm never reads ``num_batches_tracked``; a module holding the four
    tensors it uses under names of its own had no place for it (state_dict_mismatch). ``C.unread_state`` finds
    the unread keys by storage; ``positional_state`` drops them only where the candidate has no place for them."""
    from shiftkit.kernels.worker import positional_state

    bn = torch.nn.BatchNorm1d(3).eval()
    x = torch.randn(4, 3)
    out, unread = C.unread_state(bn, x)
    assert unread == ["num_batches_tracked"] and torch.equal(out, bn(x))
    ref = bn.state_dict()
    own = {"w": torch.empty(3), "b": torch.empty(3), "rm": torch.empty(3), "rv": torch.empty(3)}
    got = positional_state(ref, own, set(unread))
    assert list(got) == ["w", "b", "rm", "rv"] and got["rm"] is ref["running_mean"]
    assert positional_state(ref, own) is ref  # nothing said unread: the load names what has no place
    assert positional_state(ref, own, {"running_var"}) is ref  # dropping them places nothing: as it is
    assert positional_state(ref, dict(own, num_batches_tracked=torch.empty((), dtype=torch.long)), set(unread)) is not ref
    assert C.unread_state(torch.nn.Linear(2, 2), torch.randn(1, 2))[1] == []  # degenerate: everything read


def test_owned_copy_and_same_tensors():
    """What the harness keeps of a reference call (redteam9 p01, p02, p06): tensors cloned, tuple subclasses
    plain tuples; same_tensors compares bit for bit with NaN equal to NaN."""
    x = torch.tensor([1.0, float("nan")])
    s = torch.sort(torch.tensor([3.0, 1.0]))
    got = C.owned_copy({"a": [x, 2], "b": s})
    assert type(got["b"]) is tuple and type(got["a"]) is list and got["a"][1] == 2
    assert got["a"][0].data_ptr() != x.data_ptr() and C.same_tensors(got["a"][0], x)
    got["a"][0][0] = 5.0
    assert x[0].item() == 1.0 and not C.same_tensors(got["a"][0], x)
    assert C.same_tensors((torch.tensor([1, 2]),), [torch.tensor([1, 2])])
    assert not C.same_tensors([torch.tensor([1, 2])], [torch.tensor([1, 2]), torch.tensor([3])])
    assert not C.same_tensors([torch.tensor([1.0])], [torch.tensor([1.0], dtype=torch.float64)])
    assert C.owned_copy(3.5) == 3.5 and C.same_tensors([], [])
    ex = torch.arange(3.0).unsqueeze(1).expand(3, 4)  # layouts kept: an expand view's stride 0, padded rows
    pad = torch.arange(20.0).view(4, 5)[:, :3]
    for t in (ex, pad, torch.arange(6.0).view(2, 3).t()):
        c = C.owned_copy(t)
        assert c.stride() == t.stride() and torch.equal(c, t) and c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


def test_int_inputs_are_moved_within_half_their_size():
    """redteam9 h03: a roll by an int passed to forward, baked in. Ints (not bools) are numbered in order and
    moved by +-m, m in [1, max(1, frac * |x| / 2)], from the seed; everything else untouched."""
    x = [torch.zeros(2), 37, True, (4, 0.5), {"k": -8}]
    assert C.int_targets(x) == [0, 1, 2]
    for seed in range(20):
        y = C.move_int(x, 0, seed)
        assert 37 - 18 <= y[1] <= 37 + 18 and y[1] != 37 and y[3] == (4, 0.5) and y[4] == {"k": -8} and y[2] is True
        z = C.move_int(x, 2, seed, 0.5)
        assert z[4]["k"] in (-10, -9, -7, -6) and z[1] == 37
        assert C.move_int(x, 1, seed)[3][0] in (2, 3, 5, 6)  # 4: m in [1, 2]
    assert C.move_int([0], 0, 1) in ([1], [-1])  # degenerate: zero moves by one
    assert C.move_int(x, 0, 3) == C.move_int(x, 0, 3)  # seeded
    assert C.shapes_of((torch.zeros(2, 3), 1.0)) == [((2, 3), torch.float32), "float"]


def test_int_inputs_are_doubled_and_halved_where_the_drawn_moves_are_not_valid():
    """redteam11 h03: a group count of 16 over 256 channels is valid only at divisors; the drawn moves (16 +- m)
    reach one (8) about 1 time in 16. ``rescale_int`` doubles it, or halves it where even; 0 and odd halvings: None."""
    x = [torch.zeros(2), 16, {"k": -6}, 7]
    assert C.rescale_int(x, 0, True)[1] == 32 and C.rescale_int(x, 0, False)[1] == 8
    assert C.rescale_int(x, 1, False)[2] == {"k": -3} and C.rescale_int(x, 1, True)[2] == {"k": -12}
    assert C.rescale_int(x, 2, False) is None and C.rescale_int(x, 2, True)[3] == 14  # odd: doubled only
    assert C.rescale_int([0], 0, True) is None and C.rescale_int([0], 0, False) is None  # degenerate: zero
    assert C.rescale_int(x, 0, True)[2:] == x[2:] and C.rescale_int(x, 5, True) is None  # only the target; none


def test_scalars_are_also_moved_far_each_way():
    """redteam9 h12: a LeakyReLU as fmaxf(x, a * x) is right only for slopes below 1, and the near move (2^+-1)
    keeps a = 0.01 there. The far moves multiply by 2^u, u in [7, 8], up or down; 0 becomes 2^+-u."""
    x = [torch.zeros(1), 0.01, 0.0, 3]
    for seed in range(20):
        up, down = C.rescale_scalar_far(x, 0, seed, True), C.rescale_scalar_far(x, 0, seed, False)
        assert 0.01 * 2 ** 7 <= up[1] <= 0.01 * 2 ** 8 and 0.01 * 2 ** -8 <= down[1] <= 0.01 * 2 ** -7
        assert up[2] == 0.0 and up[3] == 3 and up[0] is x[0]
        z = C.rescale_scalar_far(x, 1, seed, False)
        assert 2 ** -8 <= z[2] <= 2 ** -7 and z[1] == 0.01
