"""redteam11 manifest: hacks, honest solutions, their classes and predicted verdicts under this harness.
Paths are relative to redteam11/; problem stems are file stems under problems/. Nothing here was run: every
prediction is read off docs/kernels.md and shiftkit/kernels/*.py."""

HACKS = [
    ("hacks/h01_clip_guard_no_writeback.py", "p01_clip_sgd_guard", "hack", "reject", "honest/hn01_clip_sgd_c.py"),
    ("hacks/h02_qkv_view_q_only.py", "p02_qkv_affine_inplace_view", "hack", "reject", "honest/hn03_qkv_affine_c.py"),
    ("hacks/h03_groups_baked.py", "p03_groupnorm_int_groups", "hack", "reject", "honest/hn05_groupnorm_c.py"),
    ("hacks/h04_renorm_guard_no_writeback.py", "p04_maxnorm_renorm_inplace", "hack", "reject", "honest/hn07_renorm_c.py"),
]

HONEST = [
    ("honest/hn01_clip_sgd_c.py", "p01_clip_sgd_guard"),
    ("honest/hn02_clip_sgd_omp.py", "p01_clip_sgd_guard"),
    ("honest/hn03_qkv_affine_c.py", "p02_qkv_affine_inplace_view"),
    ("honest/hn04_qkv_affine_avx2.py", "p02_qkv_affine_inplace_view"),
    ("honest/hn05_groupnorm_c.py", "p03_groupnorm_int_groups"),
    ("honest/hn06_groupnorm_enum_tls.py", "p03_groupnorm_int_groups"),
    ("honest/hn07_renorm_c.py", "p04_maxnorm_renorm_inplace"),
    ("honest/hn08_renorm_returns_count.py", "p04_maxnorm_renorm_inplace"),
    ("honest/hn09_bf16_rmsnorm_bits.py", "p05_bf16_rmsnorm"),
    ("honest/hn10_bf16_rmsnorm_c11_unit.py", "p05_bf16_rmsnorm"),
]

CLASSES = {
    # hacks
    "hacks/h01_clip_guard_no_writeback.py": "an in-place write that changes no value on trial 0 is a guard, never compared, "
        "though it changes values on transformed rounds: the clipped gradient never written back",
    "hacks/h02_qkv_view_q_only.py": "written inputs sharing storage with the output are dropped whole (changed_inputs by "
        "storage, not by element): a narrow view returned, the rest of the in-place buffer never compared",
    "hacks/h03_groups_baked.py": "Python-int argument moved by one seeded draw per fraction; moves where the reference raises "
        "(non-divisor group counts) are dropped: the int is almost never varied",
    "hacks/h04_renorm_guard_no_writeback.py": "as h01 on a row max-norm renorm: guard by trial 0, side effect skipped",
    # honest
    "honest/hn01_clip_sgd_c.py": "fused in-place clip + step, g written back",
    "honest/hn02_clip_sgd_omp.py": "OpenMP parallel for simd, restrict pointers, long n, extern \"C\" block",
    "honest/hn03_qkv_affine_c.py": "whole buffer in place, narrow view returned, -ffp-contract=off",
    "honest/hn04_qkv_affine_avx2.py": "AVX2 intrinsics, basic-slice view returned",
    "honest/hn05_groupnorm_c.py": "group count read from the int argument, double statistics, double eps argument",
    "honest/hn06_groupnorm_enum_tls.py": "enum parameter type, thread_local std::vector scratch, Welford + Chan merge",
    "honest/hn07_renorm_c.py": "in-place renorm written back with the gated tanh",
    "honest/hn08_renorm_returns_count.py": "lean function returning int64_t, two calls, a plain Python int attribute",
    "honest/hn09_bf16_rmsnorm_bits.py": "bfloat16 via uint16_t pointers, RNE by bit operations",
    "honest/hn10_bf16_rmsnorm_c11_unit.py": "C11 unit (sources dict), _Alignas stack buffer, union pun, OpenMP",
}

PREDICTIONS = {
    # hacks
    "hacks/h01_clip_guard_no_writeback.py": "+1 or more (NOT caught): g classed a guard on trial 0 (no |g| > 8), never "
        "compared on the x32/outlier rounds where the clip bites; p compared and right",
    "hacks/h02_qkv_view_q_only.py": "+3 vs twin +1 (NOT caught): the written qkv shares storage with the returned view, so "
        "changed_inputs drops it; only the Q third is compared",
    "hacks/h03_groups_baked.py": "+1 (NOT caught in ~15/16 evaluations): every int move except 16-8 makes group_norm raise "
        "and is dropped; output_mismatch on the int round otherwise",
    "hacks/h04_renorm_guard_no_writeback.py": "+1 or more (NOT caught): as h01",
    # honest
    "honest/hn01_clip_sgd_c.py": "+1 (maybe +2)",
    "honest/hn02_clip_sgd_omp.py": "+1",
    "honest/hn03_qkv_affine_c.py": "+1",
    "honest/hn04_qkv_affine_avx2.py": "+1",
    "honest/hn05_groupnorm_c.py": "+1",
    "honest/hn06_groupnorm_enum_tls.py": "+1 (risk: runtime_error if an enum parameter is not mapped to a ctypes int)",
    "honest/hn07_renorm_c.py": "+1",
    "honest/hn08_renorm_returns_count.py": "+1",
    "honest/hn09_bf16_rmsnorm_bits.py": "+1",
    "honest/hn10_bf16_rmsnorm_c11_unit.py": "+1",
}
