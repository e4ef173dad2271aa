"""Pure functions: static checks, comparisons, seeds, stats, rewards, metrics, parsers (no processes)."""

import math

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.kernels import correctness as C
from shiftkit.kernels import metrics, reward, static, stats
from shiftkit.kernels.backends import get_backend
from shiftkit.kernels.blocking import is_allowed
from shiftkit.kernels.build import parse_compiler_output
from shiftkit.kernels.findings import CODES, Finding
from shiftkit.kernels.kernelbench import rewrite, scale_value, size_constants
from shiftkit.kernels.runtime import parse_prototypes
from shiftkit.kernels.solution import extract_specs


def codes(fs):
    return {f.code for f in fs if f.severity == "error"}


# ----------------------------------------------------------------------------- static checks

CLEAN = """
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c
SRC = "extern \\"C\\" void f(const float* x, float* y, int64_t n) { }"
lib = load_c(name="f", source=SRC)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(3))
    def forward(self, x):
        y = torch.empty_like(x.contiguous())
        lib.f(x, y, x.numel())
        return y
"""


def test_clean_source_has_no_error_findings():
    assert codes(static.check_python(CLEAN)) == set()


@pytest.mark.parametrize("snippet,code", [
    ("try:\n    pass\nexcept Exception:\n    pass\n", "fallback_try_except"),
    ("from model import Model\nclass ModelNew(Model):\n    pass\n", "inherits_reference"),
    ("import reference\n", "imports_reference"),
    ("m = __import__('model')\n", "imports_reference"),
    ("import threading\n", "threads_or_processes"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "threads_or_processes"),
    ("import os\nos.fork()\n", "threads_or_processes"),
    ("import torch\ntorch.allclose = lambda *a, **k: True\n", "monkey_patch"),
    ("import time\ntime.perf_counter = lambda: 0\n", "monkey_patch"),
    ("import torch\nsetattr(torch, 'allclose', None)\n", "monkey_patch"),
    ("import gc\n", "introspection"),
    ("import sys\nf = sys._getframe(1).f_locals\n", "introspection"),
    ("import sys\nm = sys.modules\n", "introspection"),
    ("import ctypes\n", "introspection"),
    ("x = open('/etc/passwd').read()\n", "file_or_network_access"),
    ("import socket\n", "file_or_network_access"),
    ("import numpy as np\n", "foreign_compute"),
    ("y = x.numpy()\n", "foreign_compute"),
    ("y = x.to(torch.float16)\n", "precision_lowering"),
    ("def f(:\n", "syntax_error"),
])
def test_python_check_flags(snippet, code):
    assert code in codes(static.check_python(snippet))


def test_torch_compute_in_python_is_only_a_warning():
    fs = static.check_python("import torch\ny = torch.relu(x)\nz = a @ b\n")
    assert {f.code for f in fs} == {"torch_compute_in_python"} and all(f.severity == "warning" for f in fs)


def test_precision_allowed_when_problem_allows():
    assert "precision_lowering" not in codes(static.check_python("y = x.half()\n", allow_reduced_precision=True))
    assert "precision_lowering" not in codes(static.check_cpp("_Float16 h;", allow_reduced_precision=True))


@pytest.mark.parametrize("src,code", [
    ("#include <thread>\nvoid f(){ std::thread t([]{}); }", "threads_or_processes"),
    ("void f(){ FILE* p = fopen(\"x\", \"r\"); }", "file_or_network_access"),
    ("void f(){ _Float16 h = 0; }", "precision_lowering"),
    ("__global__ void k(){ float y = __expf(1.f); }", "precision_lowering"),
])
def test_cpp_check_flags(src, code):
    assert code in codes(static.check_cpp(src))


def test_cpp_comments_and_allowed_torch_calls_are_ignored():
    src = "// std::thread in a comment\n/* fopen( */\nauto y = torch::empty_like(x);\n"
    assert static.check_cpp(src) == []
    w = static.check_cpp("auto y = at::relu(x);")
    assert [f.code for f in w] == ["torch_op_in_kernel"] and w[0].severity == "warning" and w[0].where == "line 1"


def test_fast_math_flag_is_precision_lowering():
    assert codes(static.check_flags(["-O3", "-ffast-math"])) == {"precision_lowering"}
    assert static.check_flags(["-O3"]) == []


def test_unknown_static_check_name_raises():
    with pytest.raises(ValueError, match="valid:"):
        static.check_python("x = 1", skip=("nope",))


def test_finding_codes_are_validated():
    with pytest.raises(ValueError, match="unknown finding code"):
        Finding("made_up", "x")
    assert Finding.from_dict(Finding("timeout", "t").to_dict()) == Finding("timeout", "t")
    assert "blocked_torch_op" in CODES


# ----------------------------------------------------------------------------- extraction and parsers

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


def test_spec_key_depends_on_content_only():
    a = extract_specs('from shiftkit.kernels.runtime import load_c\nlib = load_c(name="x", source="int a;")\n')[0][0]
    b = extract_specs('# other python\nfrom shiftkit.kernels.runtime import load_c\nlib = load_c(name="x", source="int a;")\n')[0][0]
    c = extract_specs('from shiftkit.kernels.runtime import load_c\nlib = load_c(name="x", source="int b;")\n')[0][0]
    assert a.key() == b.key() != c.key()


def test_parse_compiler_output():
    text = ("/c/builds/k/src/kernels/a.cpp:12:5: error: 'foo' was not declared in this scope\n"
            "In file included from x.h:1:\n"
            "cpp_sources:3:1: fatal error: bar.h: No such file or directory\n"
            "/c/builds/k/src/kernels/a.cpp:14:1: warning: unused\n")
    errs = parse_compiler_output(text, "/c/builds/k/src")
    assert [(e.file, e.line, e.column) for e in errs] == [("kernels/a.cpp", 12, 5), ("cpp_sources", 3, 1)]
    assert errs[0].message == "'foo' was not declared in this scope"
    link = parse_compiler_output("main.o: undefined reference to `g()'\ncollect2: error: ld returned 1 exit status")
    assert link and link[0].file is None and "undefined reference" in link[0].message


def test_parse_prototypes():
    src = 'extern "C" void f(const float* __restrict__ x, float* y, int64_t n, int k, float a, double b) {}\n' \
          '// extern "C" void hidden(int x) {}\nextern "C" void g(void) { }\n'
    assert parse_prototypes(src) == {"f": ["ptr", "ptr", "i64", "i32", "f32", "f64"], "g": []}
    with pytest.raises(TypeError, match="unsupported argument type"):
        parse_prototypes('extern "C" void h(std::string s) {}')


def test_blocking_allowlist():
    assert is_allowed("aten", "empty_like") and is_allowed("aten", "view") and is_allowed("mylib", "fused")
    assert not is_allowed("aten", "relu") and not is_allowed("aten", "mm") and not is_allowed("prims", "add")


# ----------------------------------------------------------------------------- correctness

def test_compare_hand_computed():
    e = torch.tensor([1.0, 2.0, float("nan")])
    assert C.compare(e, torch.tensor([1.0, 2.0, float("nan")]))[0] is None
    code, msg, d = C.compare(e, torch.tensor([1.0, 2.001, float("nan")]))
    assert code == "output_mismatch" and "1/3" in msg and d == pytest.approx(0.001, rel=1e-3)
    # within atol + rtol*|e| = 1e-4 + 2e-4
    assert C.compare(e, torch.tensor([1.0, 2.00025, float("nan")]))[0] is None
    assert C.compare(e, torch.tensor([1.0, 2.0, 0.0]))[0] == "output_mismatch"  # NaN is no wildcard
    assert C.compare(torch.tensor([1.0, 2.0]), torch.tensor([float("nan"), 2.0]))[0] == "output_mismatch"


def test_compare_exact_types():
    class Sub(torch.Tensor):
        pass

    t = torch.ones(2)
    assert C.compare(t, t.as_subclass(Sub))[0] == "output_type"
    assert C.compare(t, torch.ones(3))[0] == "output_type"
    assert C.compare(t, torch.ones(2, dtype=torch.float64))[0] == "output_type"
    assert C.compare((t, t), [t, t])[0] == "output_type"
    assert C.compare({"a": t}, {"a": t})[0] is None
    assert C.compare(torch.tensor([1, 2]), torch.tensor([1, 3]))[0] == "output_mismatch"


def test_tolerance_presets():
    assert C.tolerance_for("float32") == (1e-4, 1e-4)
    assert C.tolerance_for("float32", "cuda_agent") == (1e-2, 1e-2)
    assert C.tolerance_for("float16") == (1e-2, 1e-2)
    assert C.tolerance_for("float32", atol=0.5) == (0.5, 1e-4)
    assert C.tolerance_for("int64") == (0.0, 0.0)
    with pytest.raises(ValueError, match="valid"):
        C.tolerance_for("float32", "loose")


def test_degeneracy():
    assert C.degeneracy(torch.zeros(4) + 5e-5, 1e-4, 1e-4) == "all_zero"
    assert C.degeneracy(torch.full((4,), 3.0), 1e-4, 1e-4) == "constant"
    assert C.degeneracy(torch.tensor([1.0, 2.0]), 1e-4, 1e-4) is None
    assert C.degeneracy(torch.tensor(0.0), 1e-4, 1e-4) is None  # scalar losses are never degenerate
    assert C.same_outputs(torch.ones(3), torch.ones(3) + 1e-6, 1e-4, 1e-4)
    assert not C.same_outputs(torch.ones(3), torch.zeros(3), 1e-4, 1e-4)


def test_mix_seed_cantor():
    assert C.mix_seed(1, 2) == 8  # (1+2)(1+2+1)/2 + 2
    assert C.mix_seed(0, 0) == 0
    assert C.mix_seed(42, 0) == 42 * 43 // 2
    assert len({C.mix_seed(a, 7) for a in range(100)}) == 100


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
    assert reward.log_speedup_reward(True, 1.0, 1.0)[0] == 0.0  # optimized == reference
    assert reward.log_speedup_reward(True, 1e9, None)[0] == 3.0  # clipped
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
    assert m["geomean_speedup_eager"] == pytest.approx(2.0)  # (2*8*0.5)^(1/3)
    assert m["geomean_speedup_compile"] == pytest.approx(0.5 ** (1 / 3))
    assert m["fast_0"] == 0.75 and m["fast_1"] == 0.5 and m["fast_2"] == 0.25 and m["mean_reward"] == 1.25
    assert metrics.set_metrics([])["pass_rate"] == 0.0 and metrics.geomean([]) is None
    assert metrics.fast_p([True, True], [1.0, 1.0], 1.0) == 0.0  # strictly greater


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


def test_cuda_fixtures_extract_and_static_check_on_cpu():
    from shiftkit.kernels import load_solution
    from shiftkit.kernels.evaluate import static_findings
    from shiftkit.kernels.fixtures import ROOT

    ok = load_solution(ROOT / "cuda" / "scale_shift_clamp_correct.py")
    (spec,) = ok.specs
    assert spec.backend == "cuda" and spec.kind == "torch" and set(spec.sources) == {"cpp_sources.cpp", "cuda_sources.cu"}
    assert codes(static_findings(ok)) == set()
    stream = load_solution(ROOT / "cuda" / "scale_shift_clamp_hack_stream.py")
    assert "threads_or_processes" in codes(static_findings(stream))


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
