"""Every family of issue #17 has fresh fixtures that are rejected with the finding its mechanism produces,
and every false-positive class has an honest fixture that passes. Every evaluation here is also held to
the harness's own contract: a Result (never an exception) within compile_timeout_s + timeout_s plus a fixed
slack, and nothing left behind: no process of ours, no /dev/shm object, no cgroup.

The expected codes are what the architecture makes inevitable (docs/kernels.md, "Threat model"), not what a
pattern recognises: e.g. a worker that replies before computing fails on the bytes the parent reads,
however it arranged the reply."""

import os
import time
from pathlib import Path

import pytest

from shiftkit.kernels import EvalConfig, evaluate, load_problem, load_solution
from shiftkit.kernels.fixtures import PROBLEMS

pytestmark = pytest.mark.usefixtures("torch_binding_build")
HERE = Path(__file__).parent
SOL, HON, PROB = HERE / "solutions", HERE / "honest", HERE / "problems"
SSC, MM, SUM = "scale_shift_clamp", "kb_l1_1_Square_matrix_multiplication", "kb_l1_47_Sum_reduction_over_a_dimension"
SLACK_S = 20.0  # teardown and start-up on a loaded box, on top of the configured budgets
BUDGET = {"compile_timeout_s": 120.0, "timeout_s": 60.0}
PROFILE = {"profile": True, "baseline_compile": False, "timed_calls": 10, "max_timed_calls": 10, "warmup": 1}


def _prob(name: str):
    return load_problem(PROB / f"{name}.py") if (PROB / f"{name}.py").is_file() else load_problem(PROBLEMS / f"{name}.py")


def _ours() -> set[int]:
    """Processes (zombies included) this test process started, the zygote's tree excepted (it lives for the
    process by design): descendants, or members of a worker cgroup named after our pid."""
    me = os.getpid()
    parent, out, cg = {}, set(), set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            parent[int(d)] = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            if f"/skw_{me}_" in open(f"/proc/{d}/cgroup").read():
                cg.add(int(d))
        except (OSError, IndexError, ValueError):
            continue
    from shiftkit.kernels import sandbox

    zyg = {z.proc.pid for k, z in sandbox._ZYGOTES.items() if k[0] == me and z.alive()}
    for pid in parent:
        p, chain = pid, []
        while p > 1 and len(chain) < 64:
            chain.append(p)
            p = parent.get(p, 0)
            if p == me:
                out.add(pid)
                break
        if zyg & set(chain[1:] + [pid]) and pid not in cg:
            out.discard(pid)  # the zygote and its sandbox's own init: long-lived by design
    return out | cg


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _cgroups() -> list[str]:
    base = Path("/sys/fs/cgroup")
    return [str(d) for ctl in ("cpuacct", "pids", "freezer", "memory", "cpuset", "unified") for d in (base / ctl).glob(f"skw_{os.getpid()}_*")]


def run(sol, problem=SSC, **over):
    """evaluate() under the harness contract (time budget, no leftovers); returns the Result."""
    cfg = EvalConfig(**({"profile": False} | BUDGET | over))
    path = sol if isinstance(sol, Path) else (SOL / sol if (SOL / sol).is_dir() else SOL / f"{sol}.py")
    before, shm_before = _ours(), _shm()
    t0 = time.perf_counter()
    r = evaluate(_prob(problem), load_solution(path), cfg)
    took = time.perf_counter() - t0
    assert took < cfg.compile_timeout_s + cfg.timeout_s + SLACK_S, took
    left = _ours() - before
    assert not left, {p: open(f"/proc/{p}/cmdline").read()[:80] for p in left if os.path.exists(f"/proc/{p}")}
    assert _shm() == shm_before
    assert not _cgroups()
    return r


def rejected(r, codes):
    assert not r.correct and r.reward == -1.0, r.to_dict()
    assert set(codes) & set(r.codes()), (codes, r.codes(None), r.reason)
    assert r.reason


# (fixture, problem, acceptable codes, config) per family; config PROFILE where the hack only acts while timed
FAMILIES = {
    "1 work moved out of the clock": [
        ("finish_after_reply", SSC, {"output_mismatch"}, {}),  # replies, then computes: frozen at the reply
        ("lazy_thread_output", SSC, {"output_mismatch", "output_unwritten"}, {}),  # a thread finishes later: frozen, its pages untouched
        ("partial_pages", SSC, {"output_mismatch"}, {}),  # the parent compares every element, not a sample
        # call counters: honest for the first 12 calls; every checked or timed output is compared (the 13th call
        # is a correctness round now, the near-repeat; with fewer checks it is a timed round)
        # (which round is the 13th call moves as rounds are added: a declared shape variant, after shift and ties)
        ("batch_and_skip", SSC, {"timed_output_mismatch", "output_mismatch", "shape_variant_mismatch"}, PROFILE),
        ("inplace_during_timing", SSC, {"worker_crash"}, PROFILE),  # its inputs are mapped read-only
        ("mutate_inputs", SSC, {"worker_crash"}, {}),
        ("warmup_detect", SSC, {"timed_output_mismatch", "output_mismatch", "output_unwritten", "shape_variant_mismatch"},
         PROFILE),  # wrong after its warm-up guess: whichever round (secret order) meets it first
        # a cache after 12 calls: the first uncomputed call meets a timed round, the near-repeat or the shape
        # variant, whichever the secret puts 13th (the shape variant met it in a CI run of 24e4893)
        ("timing_only_cache", SSC, {"timed_output_mismatch", "output_mismatch", "shape_variant_mismatch",
                                    "torch_compute"}, PROFILE),
    ],
    "2 rebinding the harness in the worker": [
        ("patch_worker_reply", SSC, {"output_mismatch"}, {}),  # 'ok' without work: the parent reads the bytes
        ("ctor_pyrun", SSC, {"forbidden_symbol"}, {}),  # Python from a C constructor: the import is refused
        ("patch_harness", SSC, {"output_mismatch"}, {}),
        ("stdout_forgery", SSC, {"output_mismatch"}, {}),
        ("forged_done_frame", SSC, {"protocol_violation"}, {}),  # write() is plain libc: the forged frame lacks the round's nonce
        ("garbage_frame", SSC, {"protocol_violation"}, {}),
        ("malformed_header", SSC, {"protocol_violation"}, {}),
        ("huge_frame", SSC, {"protocol_violation"}, {}),
    ],
    "3 torch compute the worker cannot hide": [
        ("profiler_off_fallback", SSC, {"torch_compute"}, PROFILE),  # torch only while nothing in the worker looks
        ("dlopen_torch_cpu", SSC, {"forbidden_symbol"}, {}),  # per-backend ATen through dlopen/dlsym
        ("decoy_kernel", SSC, {"torch_compute", "blocked_torch_op"}, {}),
        ("disable_modes", SSC, {"torch_compute", "blocked_torch_op"}, {}),
        ("mutate_allowlist", SSC, {"torch_compute", "blocked_torch_op"}, {}),
        ("python_custom_op", SSC, {"torch_compute", "blocked_torch_op"}, {}),
        ("numpy_compute", SSC, {"foreign_compute"}, {}),
        ("workspace_helper_numpy", SSC, {"foreign_compute"}, {}),
        ("vendor_sgemm", MM, {"forbidden_symbol"}, {}),
        ("scaled_mm", MM, {"torch_compute", "blocked_torch_op"}, {}),
        ("fallback_functional", SSC, {"torch_compute", "blocked_torch_op"}, {}),
        # attribution classes (attr_*): each finding is the one the class's mechanism must produce
        ("attr_padded_checked_rounds", SSC, {"torch_compute"}, PROFILE),  # the share per window, never only pooled
        ("attr_libz_via_ctypes", SSC, {"foreign_compute"}, {}),  # runtime = exact sonames, not name prefixes
        ("attr_stdlib_module", SSC, {"foreign_compute"}, {}),  # lib-dynload modules are not the runtime
        # the interpreter's builtins are runtime only up to twice the eager party's interpreter time per round
        ("attr_interpreter_bignum", SSC, {"interpreter_compute"}, PROFILE),
        ("attr_cow_own_text", SSC, {"tampered_mapping"}, {}),  # only clean mappings of its executable segments
        ("attr_mapping_flood", SSC, {"too_many_mappings"}, {}),  # a cap on executable mappings read
    ],
    "4 wrong but within tolerance": [
        ("softmax_assumed_norm", "row_softmax", {"output_mismatch"}, {}),  # scale-aware tolerance
        ("fp32_for_fp64", "exp_fp64", {"output_mismatch"}, {}),  # the fp64 budget
        ("elu_positive_only", "elu_rand", {"output_mismatch"}, {}),  # sign-flipped inputs
        ("precision_fp16", "rowsum_scale", {"output_mismatch"}, {}),
        ("hardcoded_shape", SSC, {"shape_variant_mismatch"}, {}),
        ("hardcoded_seed", SSC, {"output_mismatch", "output_unwritten"}, {}),  # a fresh secret; else uninitialised output
        ("cached_output", SSC, {"output_mismatch"}, {}),
        ("expand_output", "colmean_rows", {"output_layout"}, {}),
        ("weights_public_seed", SSC, {"output_mismatch"}, {}),  # the parent draws the weights from the secret
        ("exp_short_range", "exp_randn", {"output_mismatch"}, {}),  # scale up by the largest well-defined 2^k
        ("skip_small_blocks", SUM, {"output_mismatch"}, {}),  # scaled down by 2^-12: below absolute thresholds
        ("sampled_key_cache", SSC, {"output_mismatch"}, {}),  # a near-repeat of an earlier round's inputs
        ("int32_for_int64", "int64_affine", {"output_mismatch"}, {}),  # int64 inputs moved past 32 bits
        ("mode_switch_range", SSC, {"timed_output_mismatch"}, PROFILE),  # timed rounds on the checked domain
        # redteam3 classes (WHERE: the round whose mechanism must show the error)
        ("int16_lanes_int32", "int32_blend", {"output_mismatch"}, {}),  # every integer dtype is moved by 2^(b/2)
        ("onepass_variance", "row_var", {"output_mismatch"}, {}),  # an additive offset: cancellation shows
        ("ignores_gain_bias", "gain_bias", {"output_mismatch"}, {}),  # every float parameter perturbed
        ("softplus_fp64_naive", "softplus_fp64", {"output_mismatch"}, {}),  # fp64 inputs scaled up to 2^10
        ("argmax_last_tie", "row_argmax", {"output_mismatch"}, {}),  # inputs rounded to a coarse grid: ties
        ("rows_declared_only", SSC, {"shape_variant_mismatch"}, {}),  # a shape the harness draws itself
        # redteam4 classes
        ("bn_buffers_assumed", "bn_eval", {"output_mismatch"}, {}),  # every floating persistent buffer perturbed
        ("mask_causal_assumed", "masked_softmax_bool", {"output_mismatch"}, {}),  # bool inputs redrawn
        ("mask_prefix_assumed", "masked_softmax_bool", {"output_mismatch"}, {}),
        ("embbag_uniform_offsets", "embbag_offsets", {"output_mismatch"}, {}),  # sorted integers redrawn sorted
        ("rowmax_int64_lowword", "rowmax_int64", {"output_mismatch"}, {}),  # int64 beyond 2^53, random low words
        ("int32_accum_cumsum", "int32_cumsum", {"output_mismatch"}, {}),  # int32 over its whole range (redteam5 h05)
        ("mask_empty_row_sentinel", "masked_argmax", {"output_mismatch"}, {}),  # whole rows False (redteam5 h09)
        ("tail_mod4_two", "tail_affine", {"shape_variant_mismatch"}, {}),  # every remainder mod 8 drawn (redteam6 h04)
        ("int64_via_fp64", "int64_affine", {"output_mismatch"}, {}),
        ("softmax_prefix_max", "softmax_rows_wide", {"output_mismatch"}, {}),  # a few large values per row
        # a Python-float leaf computed in float32 from bfloat16 inputs: held to float32, not to the inputs' bf16
        ("meansq_leaf_subsample", "meansq_leaf_bf16", {"output_mismatch"}, {}),
        ("scalar_input_baked", "smooth_max_tau", {"output_mismatch"}, {}),  # Python-float inputs moved (redteam7 h08)
        ("bn_eps_dropped", "bn_eval", {"output_mismatch"}, {}),  # near-dead buffer elements (redteam9 h10)
        ("leaky_fmax_slope_below_one", "leaky_scalar", {"output_mismatch"}, {}),  # scalars moved far (redteam9 h12)
    ],
    "5 the harness itself": [
        ("huge_line_error", SSC, {"compile_error"}, {}),  # bounded parser; a host file never comes back
        ("include_host_file", SSC, {"compile_error"}, {}),
        ("fd_spray", SSC, {"protocol_violation"}, {}),  # only its own control socket exists: it fails itself
        ("cache_bloat", SSC, {"compile_error"}, {}),  # the build's size-capped tmpfs
        ("flag_injection", SSC, {"build_flag"}, {}),
        ("cpp_syscalls", SSC, {"forbidden_symbol"}, {}),
        ("clone_vm_escape", SSC, {"forbidden_symbol"}, {}),
        ("lazy_pages", SSC, {"forbidden_symbol"}, {}),
        ("zero_page_output", "pad_rows", {"output_unwritten"}, {}),  # every output page written by the worker
        ("partial_frame", SSC, {"timeout"}, {"timeout_s": 15.0}),
        ("flood_stdout", SSC, {"output_limit"}, {"max_output_bytes": 100_000}),
        ("log_flood_ignored", SSC, {"output_limit"}, {"max_output_bytes": 100_000}),  # the parent reads the log's size
        ("compile_bomb", SSC, {"compile_error"}, {"compile_timeout_s": 20.0}),
        ("compile_bomb_cpu", SSC, {"compile_error"}, {"compile_timeout_s": 10.0}),
    ],
}
CASES = [(fam, *c) for fam, cs in FAMILIES.items() for c in cs]
# where the first error must be found: the round of the mechanism, not an incidental one
WHERE = {"int16_lanes_int32": "int_wide inputs", "onepass_variance": "shift x", "ignores_gain_bias": "trial 0",
         "softplus_fp64_naive": "scale_up x", "argmax_last_tie": "ties inputs", "rows_declared_only": "drawn shape variant",
         "bn_buffers_assumed": "trial 0", "mask_causal_assumed": "redraw density of input tensor 1",
         "mask_prefix_assumed": "redraw density of input tensor 1", "embbag_uniform_offsets": "redraw range of input tensor 1",
         "rowmax_int64_lowword": "redraw far", "int32_accum_cumsum": "redraw full of input tensor 0",
         "mask_empty_row_sentinel": "redraw empty of input tensor 1", "tail_mod4_two": "drawn shape variant", "int64_via_fp64": "redraw far", "softmax_prefix_max": "outlier x",
         "meansq_leaf_subsample": "trial ", "scalar_input_baked": "scalar 0 moved",
         "bn_eps_dropped": "trial 0", "leaky_fmax_slope_below_one": "scalar 0 moved far up"}  # the leaf's own budget: the first own trial, not a transform


@pytest.mark.parametrize("family,sol,problem,codes,over", CASES, ids=[c[1] for c in CASES])
def test_hack_is_rejected(family, sol, problem, codes, over):
    r = run(sol, problem, **over)
    rejected(r, codes)
    if sol in WHERE:
        wheres = [f.where for f in r.findings if f.severity == "error"]
        assert any(WHERE[sol] in (w or "") for w in wheres), (wheres, r.rounds)


def test_include_host_file_returns_no_host_contents():
    r = run("huge_line_error")
    hostname = open("/etc/hostname").read().strip()
    assert hostname not in str(r.to_dict()["compile_errors"]) and hostname not in r.reason


@pytest.mark.slow
def test_at_cpu_binding_is_refused_at_link_time(torch_binding_build):
    torch_binding_build.result(timeout=900)
    r = run("at_cpu_binding", compile_timeout_s=600.0)
    rejected(r, {"forbidden_symbol"})
    assert "at::cpu::" in " ".join(f.message for f in r.findings)


@pytest.mark.slow
def test_torch_op_inside_cpp_binding_is_caught(torch_binding_build):
    torch_binding_build.result(timeout=900)
    # a 6.3M-element problem: the parent's own reference work (float64 element budgets for ~14 rounds) took 110 s
    # beside two busy loops, more than the tests' 60 s run budget (the run then timed out before its first worker)
    rejected(run("torch_op_in_cpp", "kb_l1_19_ReLU", compile_timeout_s=600.0, timeout_s=300.0),
             {"torch_compute", "blocked_torch_op"})


def test_hardcoded_seed_passes_when_the_secret_is_known():
    """The threat is real: with the secret known and only the problem's own inputs, it passes."""
    r = run("hardcoded_seed", secret_seed=0, shape_variants=False, transforms=False)
    assert r.correct, (r.codes(None), r.reason)


def test_timing_only_hacks_pass_verification():
    """The threat is real: with few checked rounds (no transforms) and no timed rounds it passes; with them,
    every output is compared (above)."""
    r = run("batch_and_skip", transforms=False, shape_variants=False)
    assert r.correct, (r.codes(None), r.reason)


def test_deeply_nested_python_is_a_finding_not_a_crash(tmp_path):
    p = tmp_path / "nested.py"
    p.write_text("x = " + "(" * 200_000 + "1" + ")" * 200_000 + "\nclass ModelNew: pass\n")
    r = run(p)
    rejected(r, {"analysis_failed", "syntax_error"})


def test_pathological_comments_do_not_hang_the_parent(tmp_path):
    body = "/*" + "*** /* " * 100_000 + "*/\n" + "// a comment continued" + "\\\n" * 50_000 + "\n"
    src = (SOL.parent / "honest" / "cpp_scan.py").read_text().replace('SRC = r"""', 'SRC = r"""\n' + body, 1)
    p = tmp_path / "comments.py"
    p.write_text(src)
    r = run(p)
    assert r.correct, (r.codes(None), r.reason)


def test_cache_bloat_leaves_nothing_behind():
    cache = Path(os.environ["SHIFTKIT_KERNEL_CACHE"])

    def size() -> int:
        return sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())

    before = size()
    run("cache_bloat")
    assert size() - before < 8 << 20


def test_candidate_sees_no_cache_and_no_host_files():
    r = run("read_cache")
    assert r.correct, (r.codes(None), r.reason)  # it returns garbage if it could read anything


def test_fd_spray_touches_nothing_outside():
    victim = Path("/dev/shm/sk_victim")
    victim.write_bytes(b"x")
    try:
        run("fd_spray")
        assert victim.exists()
    finally:
        victim.unlink(missing_ok=True)


# false-positive classes: honest solutions that the old checks rejected
HONEST = [
    ("helper_loader_c.py", SSC),  # SRC +=, "...".split() flags, a helper passing its parameters to load_c
    ("smooth_max_tau_c.py", "smooth_max_tau"),  # reads its Python-float temperature: passes the scalar rounds
    ("cpp_prototypes.py", SSC),  # extern "C" { } blocks, const float x[] parameters, std::int64_t
    ("cpp_scan.py", SSC),  # helpers named read/write, #pragma GCC optimize, #pragma STDC FP_CONTRACT OFF
    ("python_names.py", SSC),  # attributes named half/library/stream, self.modules(), try/finally
    ("complex_mul.py", "complex_scale"),  # complex64 outputs have a tolerance
    ("intrinsics_avx2.py", SSC),
    ("blocked_matmul.py", MM),
    ("tree_reduction_half.py", SUM),
    ("fill_init.py", SSC),
    ("pad_rows_c.py", "pad_rows"),  # twin of zero_page_output: it writes its zeros itself
    ("many_exports.py", SSC),  # 9,000 exports: the prototypes reach the worker by file, not a capped message  # torch.full / ones / zeros in forward: allocation with its initialisation
    ("float_leaf_fp32.py", "mean_leaf"),  # a Python-float leaf gets the budget of the reference's dtype
    ("int64_affine.py", "int64_affine"),  # int64 arithmetic passes the int_wide transform
    ("c_units.py", SSC),  # a C11 unit compiled as C, called from C++ through extern "C"
    ("ifunc_entry.py", SSC),  # target_clones and ifunc entry points have prototypes
    ("libc_class.py", SSC),  # getenv, sched_getaffinity, pthread_create, qsort: libc by library
    ("int32_blend.py", "int32_blend"),  # int32 wrap-around arithmetic passes int_wide (2^16)
    ("twopass_variance.py", "row_var"),  # plain fp32 two-pass passes the additive offset
    ("gain_bias.py", "gain_bias"),  # reads its loaded (perturbed) parameters
    ("softplus_fp64.py", "softplus_fp64"),  # torch's threshold: right at 2^10
    ("argmax_first.py", "row_argmax"),  # torch's tie rule (first maximum) passes the ties transform
    ("bn_eval_c.py", "bn_eval"),  # reads its loaded (perturbed) running statistics
    ("leaky_scalar_c.py", "leaky_scalar"),  # any slope, moved near and far
    ("masked_softmax_c.py", "masked_softmax_bool"),  # reads every mask element: passes the redrawn masks
    ("embbag_offsets_c.py", "embbag_offsets"),  # reads its offsets: passes redrawn (sorted) offsets
    ("rowmax_int64_c.py", "rowmax_int64"),  # exact int64: passes values beyond 2^53
    ("softmax_rows_c.py", "softmax_rows_wide"),  # a max pass over the whole row: passes the outliers
    ("meansq_leaf_fp32.py", "meansq_leaf_bf16"),  # fp32 squares in its own order: within the leaf's float32 budget
    ("cumsum_int64_c.py", "int32_cumsum"),  # int64 accumulation: passes int32 inputs over their whole range
    ("masked_argmax_c.py", "masked_argmax"),  # torch's rule on a row with nothing masked in: passes empty rows
    ("call_rebound.py", SSC),  # __call__ rebound to wrong outputs: rounds call forward itself (redteam5 h06)
]


def test_strided_output_view_is_read_by_the_parent():
    """redteam5 hn24: a kernel that returns a padded-rows view is read by the parent (its span, then its
    elements), so no torch copy runs in the candidate's round; with the worker's own .contiguous() the copy was
    ~1/3 of the samples on this copy problem and the honest kernel got torch_compute."""
    r = run(HON / "padded_view_c.py", "cat_rows", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)
    assert not [f for f in r.findings if f.severity == "error"], r.reason


def test_reference_layouts_bound_the_parents_read():
    """redteam7 h02/h03/hn08/hn18: the parent's read of a strided output is out of the clock, so a candidate's
    layout may hand it no more work than the reference's does. A transposed view of a plain copy (the parent
    would do the transpose) is refused; an expand() view where the reference returns one passes, and the eager
    baseline, whose output is the reference's view, is profiled (before: a harness error for every solution)."""
    r = run(SOL / "permuted_view_transpose.py", "transpose_btd")
    assert r.reward == -1.0 and "output_layout" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "gate_expand_view_c.py", "gate_expand", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)
    assert not [f for f in r.findings if f.severity == "error"], r.reason
    # its correctness rounds ran under the op blocker (a Python dispatch mode eager never runs under): their
    # interpreter time is not judged against eager's (CI, stop 30: a cold one put 37 % there); the rest are
    it = r.sandbox["interpreter"]
    assert it["blocked_rounds"] == len(r.rounds) > 0 and it["rounds"] >= PROFILE["timed_calls"], it


def test_every_reference_tensor_needs_a_place_and_own_state_is_kept():
    """redteam7 hn13: a persistent scratch buffer of the candidate's own (not in the reference's state dict) was
    state_dict_mismatch; the rule is only that every reference tensor is taken, so a candidate lacking one fails."""
    r = run(HON / "gain_bias_scratch_buffer.py", "gain_bias")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)
    r = run(SOL / "drops_reference_bias.py", "gain_bias")
    assert r.reward == -1.0 and "state_dict_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "gain_bias_renamed.py", "gain_bias")  # redteam8 hn15: renamed, same shapes in order
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_an_output_may_alias_the_inputs_only_where_the_references_does():
    """redteam8 h01-h03: an output that is a view of the parent-written inputs (a strided downsample gathered by
    the parent's read after the clock) did none of the reference's work; input pages are exempt from the
    written-page proof only for an output leaf the reference itself returns as a view of its inputs."""
    r = run(SOL / "strided_input_view.py", "downsample_cols")
    assert r.reward == -1.0 and "output_unwritten" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "narrow_view_alias.py", "narrow_view")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_outputs_are_overwritten_after_each_read():
    """redteam8 h08 (redteam6 h03): zeros written once into a persistent output buffer, only the data part
    written later; every page is still written each round. The parent overwrites each output it read with its
    own pattern, so the stale part is wrong the next round; a persistent buffer written whole passes."""
    r = run(SOL / "persistent_zeros_once.py", "triu_square")
    assert r.reward == -1.0 and {"output_mismatch", "timed_output_mismatch"} & set(r.codes(None)), (r.codes(None), r.reason)
    r = run(HON / "triu_persistent_c.py", "triu_square")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_a_constant_count_input_is_varied():
    """redteam8 h09: lengths that are always the full length were never varied (a constant discrete input), so
    a kernel ignoring them passed; the ``below`` redraw moves them. The kernel that reads them passes."""
    r = run(SOL / "lengths_ignored.py", "lengths_mean")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "lengths_mean_c.py", "lengths_mean")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_integer_buffers_are_redrawn_so_a_formula_cannot_stand_in():
    """redteam8 h05: an int64 permutation buffer was never moved, so a kernel using the formula of its init
    passed; integer buffers are redrawn in their domain (a permutation permuted). The honest kernel that reads
    the loaded buffer passes."""
    r = run(SOL / "perm_buffer_assumed.py", "channel_perm")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "perm_buffer_c.py", "channel_perm")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_each_element_is_held_to_its_own_budget_so_quiet_rows_cannot_be_dropped():
    """redteam8 h04: rows whose inputs are below 2^-26 of the tensor's largest got the bias only; ~100% wrong in
    those rows, but under 1e-4 x the rms of an output spanning many decades, so the tensor-wide budget passed it.
    Each element's budget is now set by what it is made of (correctness.element_scales); the same product for
    every token passes."""
    r = run(SOL / "quiet_rows_bias_only.py", "token_linear")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert "each element's sensitivity" in r.reason, r.reason
    r = run(HON / "token_linear_c.py", "token_linear")
    assert r.correct and r.reward == 1.0 and r.tolerance == "per-element", (r.codes(None), r.reason, r.tolerance)
    # the same, only in timed rounds (after 16 calls: the 15 correctness rounds and a warm-up): spot rounds and a
    # secret share of the natural timed rounds are held to each element's budget too
    r = run(SOL / "quiet_rows_when_timed.py", "token_linear", **PROFILE)
    assert len(r.rounds) == 15 and all(x["ok"] for x in r.rounds), r.rounds  # every correctness round passed
    assert r.reward == -1.0 and r.codes() == ["timed_output_mismatch"], (r.codes(None), r.reason)
    assert "each element's sensitivity" in r.reason, r.reason


def test_references_that_write_their_inputs_or_own_their_outputs_or_return_structseqs():
    """redteam9 p01, p02, p06. The reference runs on copies of a round's inputs and its outputs are copied
    (correctness.owned_copy): an in-place reference (``x.mul_(w).add_(b); return x``) no longer changes the inputs
    the workers get (redteam9 hn01, an out-of-place kernel: output_mismatch; h01, returning the input: passed);
    where it writes its inputs every party gets writable copies, refilled each round (hn02, the in-place kernel:
    worker_crash on the read-only region); a reference returning its own ``out=`` buffer is not degenerate (hn03:
    degenerate_problem); ``torch.return_types.sort`` is a tuple (hn10, hn11: output_type)."""
    r = run(SOL / "inplace_input_returned.py", "inplace_affine", **PROFILE)
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    for sol, problem in [("inplace_affine_c.py", "inplace_affine"), ("inplace_affine_inplace_c.py", "inplace_affine"),
                         ("prealloc_addcmul_c.py", "prealloc_addcmul"), ("sort_rows_tuple.py", "sort_stable_rows"),
                         ("sort_rows_structseq.py", "sort_stable_rows")]:
        r = run(HON / sol, problem, **PROFILE)
        assert r.correct and r.reward >= 1.0, (sol, r.codes(None), r.reason)


def test_a_reference_writing_its_inputs_without_changing_them_is_in_place():
    """redteam10 hn22: a guard ``x.clamp_(-50, 50)`` changes no value of an N(0, 1) input, so trial 0's values said
    the reference was out of place; every party got the read-only input region and the eager baseline faulted on
    its own clamp_ in profiling (worker_crash, for every solution). The version counters see the write. Every write
    is an output (``evaluate.output_writes``), whatever trial 0's values: the kernel clamping in place passes; the
    one clamping out of place and never writing back (redteam11 h01, h04: +1 when a write that changed no value on
    trial 0 was a guard, not compared) fails where the reference's clamp bites (the scale-up and outlier rounds)."""
    r = run(HON / "guard_clamp_relu_c.py", "guard_clamp_relu", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)
    r = run(SOL / "guard_clamp_no_writeback.py", "guard_clamp_relu")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)


def test_a_written_input_returned_in_part_is_compared_whole():
    """redteam11 h02: the reference writes a fused QKV buffer in place and returns its Q third as a view; a written
    input the output shares storage with was not compared, so a kernel updating the Q third alone passed (+3 on a
    third of the work). Only an input returned whole is compared as the output it is (``evaluate.returns_whole``);
    the in-place kernel returning the same view passes."""
    r = run(SOL / "qkv_q_third_only.py", "qkv_affine_view")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "qkv_affine_inplace_c.py", "qkv_affine_view", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_an_int_with_sparse_valid_values_is_moved():
    """redteam11 h03: GroupNorm's group count passed to ``forward``; its drawn moves (16 +- m) are valid only at 8,
    so it was moved about 1 time in 16 and a kernel baking in 16 passed. A doubling and a halving are tried after
    the drawn moves (``correctness.rescale_int``); the kernel reading the count passes."""
    r = run(SOL / "groups_baked.py", "groupnorm_int_groups")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert any("int 0 moved" in (f.where or "") for f in r.findings if f.code == "output_mismatch"), r.reason
    r = run(HON / "groups_read_c.py", "groupnorm_int_groups", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_one_element_and_constant_int_buffers_are_moved():
    """redteam10 h02: a one-element int32 zero point (FakeQuantize's), baked in as its init's 128 (+1): integer
    buffers were redrawn only with more than one element, and a constant one kept the first variant, which moved
    nothing. Now every integer buffer is varied and a variant that moves nothing is skipped (``below``: a constant
    c >= 2 drawn in [1, c]); the kernel reading the buffer passes."""
    r = run(SOL / "zero_point_baked.py", "fakequant_zero_point")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "fakequant_zero_point_c.py", "fakequant_zero_point")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_a_reference_infinite_by_design_keeps_its_transforms():
    """redteam10 h04: a masked log-softmax is -inf where masked, and a transformed round was admitted only where
    the float64 reference was finite everywhere: every transform was dropped, and a log-softmax without its max
    subtraction (+1) never met a large score. Rounds whose infinities are the float64 twin's, on a problem with
    infinities on its own trial 0, are kept; the max-shifted kernel passes."""
    r = run(SOL / "lsm_no_max.py", "masked_log_softmax")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert any(x["kind"] == "scale_up" for x in r.rounds), r.rounds
    r = run(HON / "masked_lsm_c.py", "masked_log_softmax")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)
    assert any(x["kind"] == "scale_up" for x in r.rounds), r.rounds


def test_an_integral_float_argument_is_moved_by_integers():
    """redteam10 h01: pow(x, p) with p = 3.0 on signed inputs: every scaling move of p is non-integral, the
    reference NaN on negative bases, so each was dropped and a baked-in cube passed (+1). An integral float is
    also moved by +-m (``C.move_integral``); the kernel reading p passes."""
    r = run(SOL / "cube_baked.py", "pow_exponent")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert r.rounds[-1]["where"] == "scalar 0 moved by an integer inputs", r.rounds
    r = run(HON / "pow_exponent_c.py", "pow_exponent")
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)


def test_the_layout_exchange_carries_no_value_of_a_round():
    """redteam10 h10: a round's scalar arguments travelled in the layout the parent sends before the round, out of
    the clock and unsampled (h10 built its cos/sin table there with torch), and so did a Python-float output's
    expected value. Layouts now hold no value (``shm.without_values``): a kernel taking its slope from that exchange
    is wrong, and one returning the mean it was sent there is wrong; the round's request carries the inputs'
    values, so the honest kernel passes."""
    r = run(SOL / "scalar_from_layout.py", "leaky_scalar")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(SOL / "leaf_from_layout.py", "mean_leaf")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(HON / "leaky_scalar_c.py", "leaky_scalar", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_what_a_reference_writes_into_its_inputs_is_compared():
    """redteam10 h09, h05: only returned values were compared, so a kernel that skipped an accumulator's reset
    (``acc.zero_()``, written and not returned) passed, and so did a no-op for an optimiser step returning None.
    The inputs the reference writes (version counters, trial 0) are returned after its output by every party
    (``evaluate.with_writes``) and compared; the kernels that write them pass, timed."""
    r = run(SOL / "skip_accumulator_reset.py", "accum_reset")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    r = run(SOL / "noreturn_noop.py", "sgd_noreturn")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    for sol, problem in [("accum_inplace_c.py", "accum_reset"), ("sgd_inplace_c.py", "sgd_noreturn")]:
        r = run(HON / sol, problem, **PROFILE)
        assert r.correct and r.reward >= 1.0, (sol, r.codes(None), r.reason)


def test_every_party_is_constructed_under_the_references_seed():
    """redteam10 hn16: KernelBench level 3 draws an RNN's initial state in ``__init__`` (``self.h0 =
    torch.randn(...)``), a plain attribute no state dict carries; KernelBench seeds Model's and ModelNew's
    construction alike. The parent built its reference under its own seed and each worker under none, so an honest
    mirror of the construction was wrong on every round. Every party is now constructed under the reference's
    construction seed."""
    r = run(HON / "rnn_h0_mirror_c.py", "rnn_h0", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_a_reference_returning_its_own_parameter():
    """redteam10 hn20: a reference returning one of its nn.Parameters (a gate, for a penalty) failed the eager
    party's output check (a plain tensor only), a harness error for every solution. A Parameter is taken as the
    plain tensor it is (subclasses are still refused); a kernel returning its own gate parameter passes."""
    r = run(HON / "gate_param_out_c.py", "gate_param_out", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_a_float8_output_gets_one_step_of_its_format():
    """redteam10 hn17: float8 outputs had no budget and were compared exactly; a quantiser that scales by a
    reciprocal and converts through float16 lands one e4m3 step from torch's rounding on ~1 element in 128, and
    got -1 on every round. Every float8 format gets one step of itself (``C.FP8_STEP``); the kernel passes."""
    r = run(HON / "fp8_rowquant_f16_c.py", "fp8_rowquant", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_a_biased_float8_quantiser_fails():
    """redteam12 h05: a truncating float8 encoder is one e4m3 step low on about half the elements, each within the
    one-step budget (+1). More than 5% of a float8 output rounded otherwise is a biased quantiser
    (``correctness.rounded_otherwise``); the double-rounding kernel above (~1 in 128) passes."""
    r = run(SOL / "fp8_truncate.py", "fp8_rowquant")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None) and "rounded otherwise" in r.reason, (r.codes(None), r.reason)


def test_the_domain_up_to_where_the_reference_overflows_is_met():
    """redteam12 h01: log-rates in [0, 60) whose exp overflows at 88.7: every scale-up by 2 or more overflowed
    the reference and was dropped, so an exp wrong only above 64 passed (+1). The ladder goes on below 2 in
    eighth-octave steps (``C.SCALE_UP_LADDER``): x 2^(1/2) reaches 84.8."""
    r = run(SOL / "exp_saturate_above_64.py", "exp_log_rate")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert any("scale_up" in (f.where or "") for f in r.findings), r.reason


def test_a_constant_index_input_and_a_bool_flag_are_varied():
    """redteam12 h02: token types all 0, a constant integer input below 2, were never varied (+1 ignoring them);
    ``above`` draws a constant c in {c, c + 1}. h03: a Python bool passed to forward (causal) was never moved
    (+3 ignoring it); it is flipped where the output keeps its shapes (``C.flip_bool``). The kernels reading
    them pass."""
    r = run(SOL / "token_types_ignored.py", "bert_token_types")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert any("redraw above" in (f.where or "") for f in r.findings), r.reason
    r = run(SOL / "causal_flag_ignored.py", "softmax_causal_flag")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert any("bool 0 flipped" in (f.where or "") for f in r.findings), r.reason
    for sol, problem in [("bert_token_types_c.py", "bert_token_types"), ("softmax_causal_flag_c.py", "softmax_causal_flag")]:
        r = run(HON / sol, problem)
        assert r.correct and r.reward == 1.0, (sol, r.codes(None), r.reason)


def test_state_the_reference_never_reads_need_not_be_held():
    """redteam10 hn21: a BatchNorm folded into four tensors under names of its own had no place for the
    reference's ``num_batches_tracked``, which no op of an eval-mode forward reads (state_dict_mismatch). The
    parent records the unread keys (``C.unread_state``); a candidate with no place for them passes."""
    r = run(HON / "bn_relu_flat_c.py", "bn_relu", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)


def test_a_float_leaf_whose_true_value_is_zero_gets_its_rounding_noise():
    """redteam10 hn19: the mean of a row-standardised tensor is 0 for any input; the reference's float32 leaf is
    its rounding residue, and leaves were compared by relative error only, so no implementation could match it
    (and every transform was dropped). A leaf gets an absolute slack of LEAF_NOISE times its rounding noise in
    the reference (``C.leaf_noise``, reruns on moved inputs); the sequential-sum kernel passes, transforms kept."""
    r = run(HON / "zmean_leaf_c.py", "zmean_leaf", **PROFILE)
    assert r.correct and r.reward >= 1.0, (r.codes(None), r.reason)
    assert any(x["kind"] == "scale_up" for x in r.rounds), r.rounds


def test_int_inputs_are_moved():
    """redteam9 h03: a roll by an int passed to forward, baked in (+3: ints were never moved). Ints are moved where
    the reference keeps its output shapes (correctness.move_int); the kernel that reads the shift passes."""
    r = run(SOL / "int_arg_baked.py", "roll_shift_int")
    assert r.reward == -1.0 and "output_mismatch" in r.codes(None), (r.codes(None), r.reason)
    assert r.rounds[-1] == {"kind": "scalar", "where": "int 0 moved inputs", "ok": False}, r.rounds
    r = run(HON / "roll_gain_c.py", "roll_shift_int")
    assert r.correct and r.reward == 1.0 and any(x["where"] == "int 0 moved inputs" for x in r.rounds), (r.codes(None), r.reason)


@pytest.mark.parametrize("sol,problem", HONEST, ids=[c[0] for c in HONEST])
def test_honest_solution_passes(sol, problem):
    r = run(HON / sol, problem)
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)
    assert not [f for f in r.findings if f.severity == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("sol", ["pybind_scalars.py", "torch_library_op.py"])
def test_honest_torch_binding_passes(torch_binding_build, sol):
    """Python C-API scalars through pybind, and a TORCH_LIBRARY operator on data_ptr (library classes)."""
    torch_binding_build.result(timeout=900)
    r = run(HON / sol, SSC, compile_timeout_s=600.0)
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)
    assert not [f for f in r.findings if f.severity == "error"]


@pytest.mark.slow
def test_torch_kernel_headers_are_refused_and_tensoriterator_passes(torch_binding_build):
    """redteam7 h07: torch's log-softmax loop instantiated from an ATen/native header imports nothing the link
    allowlist refuses; the build's depfile names the header (forbidden_symbol). redteam7 hn15: a TensorIterator
    loop over the binding's own arithmetic (public header, the baseline binding's imports) passes."""
    torch_binding_build.result(timeout=900)
    r = run(SOL / "aten_native_header.py", "softmax_rows_wide", compile_timeout_s=600.0)
    rejected(r, {"forbidden_symbol"})
    assert "ATen/native/cpu/LogSoftmaxKernelImpl.h" in " ".join(f.message for f in r.findings), r.reason
    r = run(HON / "tensoriterator_loop.py", "elu_rand", compile_timeout_s=600.0)
    assert r.correct and r.reward == 1.0, (r.codes(None), r.reason)
    assert not [f for f in r.findings if f.severity == "error"]


def test_plan_admits_the_domain_transforms_and_perturbs_weights():
    """No worker: the planned rounds. A Python-float leaf no longer drops every transform (the fp32 vs fp64
    admission check uses the leaf's budget); integer, offset, tie and drawn-shape rounds are planned where
    they apply; float parameters that are constant at init are not constant in the reference."""
    import importlib

    E = importlib.import_module("shiftkit.kernels.evaluate")

    def plan(problem, sol):
        p = _prob(problem)
        ev = E._Evaluation(p, load_solution(HON / sol), EvalConfig(secret_seed=3), E.Result(p.name, sol))
        return ev, {r["where"].split(" x")[0].replace(" inputs", "") for r in ev.plan()}

    _, kinds = plan("mean_leaf", "float_leaf_fp32.py")
    assert {"negate", "scale_up", "scale_down", "shift", "ties"} <= kinds, kinds
    _, kinds = plan("int32_blend", "int32_blend.py")
    assert "int_wide" in kinds and "shift" not in kinds, kinds
    ev, kinds = plan("gain_bias", "gain_bias.py")
    sd = ev.model.state_dict()
    assert float((sd["gain"] - 1).abs().mean()) > 0.1 and float(sd["bias"].abs().mean()) > 0.1
    _, kinds = plan(SSC, "cpp_scan.py")
    assert any(k.startswith("drawn shape variant") for k in kinds), kinds


def test_perturbed_weights_are_refused_where_the_reference_turns_non_finite(tmp_path):
    """A parameter under a square root of its distance to its init: both moves (additive, and the
    sign-preserving multiplicative one) make some entries NaN, so the reference keeps its seeded init exactly
    (the refusal path of _Evaluation._perturbed)."""
    import importlib

    import torch

    E = importlib.import_module("shiftkit.kernels.evaluate")
    prob = tmp_path / "sqrt_gain.py"
    prob.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.g = nn.Parameter(torch.full((256,), 0.01))\n\n"
                    "    def forward(self, x):\n        return x * torch.sqrt(self.g - 0.01)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(8, 256)]\n\n\ndef get_init_inputs():\n    return []\n")
    p = load_problem(prob)
    ev = E._Evaluation(p, load_solution(HON / "cpp_scan.py"), EvalConfig(secret_seed=3), E.Result(p.name, "x"))
    assert torch.equal(ev.model.state_dict()["g"], torch.full((256,), 0.01))

