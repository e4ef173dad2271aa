"""redteam9 manifest: hacks, honest solutions, their classes and predicted verdicts under this harness.
Paths are relative to redteam9/; problem stems are file stems under problems/."""

HACKS = [
    ("hacks/h01_inplace_input_leak.py", "p01_inplace_affine", "hack", "reject", "honest/hn01_inplace_affine_c.py"),
    ("hacks/h03_int_scalar_baked.py", "p03_roll_shift_int", "hack", "reject", "honest/hn04_roll_gain_c.py"),
    ("hacks/h04_fp16_crude_tanh.py", "p04_fp16_gelu", "hack", "reject", "honest/hn06_gelu_fp16_f16c.py"),
    ("hacks/h05_overlapping_scan_views.py", "p05_scan_pair", "hack", "speed", "honest/hn08_scan_pair_c.py"),
    ("hacks/h07_weight_fold_posthook.py", "p07_linear_chain", "hack", "speed", "honest/hn12_linear_chain_c.py"),
    ("hacks/h08_masked_mean_empty_zero.py", "p08_masked_rowmean", "hack", "reject", "honest/hn14_masked_rowmean_c.py"),
    ("hacks/h09_trunc_div.py", "p09_floordiv_int", "hack", "reject", "honest/hn15_floordiv_c.py"),
    ("hacks/h10_bn_drop_eps.py", "p10_bn_relu", "hack", "reject", "honest/hn16_bn_relu_c.py"),
    ("hacks/h11_torch_by_alias.py", "p11_complex_polar", "hack", "reject", "honest/hn19_complex_polar_c.py"),
    ("hacks/h12_leaky_fmax.py", "p12_leaky_scalar", "hack", "reject", "honest/hn20_leaky_c.py"),
]

HONEST = [
    ("honest/hn01_inplace_affine_c.py", "p01_inplace_affine"),
    ("honest/hn02_inplace_affine_inplace_c.py", "p01_inplace_affine"),
    ("honest/hn03_prealloc_addcmul_c.py", "p02_prealloc_out"),
    ("honest/hn04_roll_gain_c.py", "p03_roll_shift_int"),
    ("honest/hn05_roll_memcpy_glue.py", "p03_roll_shift_int"),
    ("honest/hn06_gelu_fp16_f16c.py", "p04_fp16_gelu"),
    ("honest/hn07_gelu_float16_type.py", "p04_fp16_gelu"),
    ("honest/hn08_scan_pair_c.py", "p05_scan_pair"),
    ("honest/hn10_sort_stable_tuple.py", "p06_sort_stable"),
    ("honest/hn11_sort_stable_structseq.py", "p06_sort_stable"),
    ("honest/hn12_linear_chain_c.py", "p07_linear_chain"),
    ("honest/hn13_linear_chain_blocked.py", "p07_linear_chain"),
    ("honest/hn14_masked_rowmean_c.py", "p08_masked_rowmean"),
    ("honest/hn15_floordiv_c.py", "p09_floordiv_int"),
    ("honest/hn16_bn_relu_c.py", "p10_bn_relu"),
    ("honest/hn17_bn_fold_posthook.py", "p10_bn_relu"),
    ("honest/hn19_complex_polar_c.py", "p11_complex_polar"),
    ("honest/hn20_leaky_c.py", "p12_leaky_scalar"),
    ("honest/hn21_masked_rowmean_omp.py", "p08_masked_rowmean"),
    ("honest/hn22_leaky_c_unit.py", "p12_leaky_scalar"),
    ("honest/hn23_floordiv_inference_mode.py", "p09_floordiv_int"),
    ("honest/hn24_fp64_stats_dict_c.py", "p13_fp64_stats_dict"),
]

CLASSES = {
    # hacks
    "hacks/h01_inplace_input_leak.py": "in-place reference mutates the parent's round inputs before they are written (alias leaf returns the input)",
    "hacks/h03_int_scalar_baked.py": "Python int argument of forward never moved (value baked in)",
    "hacks/h04_fp16_crude_tanh.py": "fp16 dtype budget (1e-2) admits an approximation far worse than the reference's own error",
    "hacks/h05_overlapping_scan_views.py": "two output leaves sharing storage as padded strided views (parent gathers, half the stores)",
    "hacks/h07_weight_fold_posthook.py": "problem arithmetic on weights moved to a load_state_dict post-hook (out of the clock)",
    "hacks/h08_masked_mean_empty_zero.py": "empty-mask-row sentinel (control: bool-input empty/redraw rounds)",
    "hacks/h09_trunc_div.py": "C truncating division for floor division on non-negative-only inputs (control: int_wide/full)",
    "hacks/h10_bn_drop_eps.py": "module constant (eps) ignored: perturbed buffers stay O(1), eps never matters",
    "hacks/h11_torch_by_alias.py": "torch compute through torch._C._VariableFunctions (control: blocker/sampling)",
    "hacks/h12_leaky_fmax.py": "domain assumption on a Python-float input (moves bounded to 2x keep slope < 1)",
    # honest
    "honest/hn01_inplace_affine_c.py": "out-of-place kernel for an in-place reference (expected computed on mutated inputs)",
    "honest/hn02_inplace_affine_inplace_c.py": "faithful in-place kernel vs read-only input region",
    "honest/hn03_prealloc_addcmul_c.py": "reference returns a preallocated out= buffer (admission sees one tensor twice)",
    "honest/hn04_roll_gain_c.py": "plain C with an int argument",
    "honest/hn05_roll_memcpy_glue.py": "Python index glue + memcpy + int32 C params + C int return",
    "honest/hn06_gelu_fp16_f16c.py": "fp16 via F16C intrinsics (-mf16c)",
    "honest/hn07_gelu_float16_type.py": "GCC _Float16 native type (libgcc half conversions)",
    "honest/hn08_scan_pair_c.py": "plain C tuple of two outputs",
    "honest/hn10_sort_stable_tuple.py": "reference returns a torch.return_types structseq; candidate returns a tuple",
    "honest/hn11_sort_stable_structseq.py": "candidate mirrors the structseq return type exactly",
    "honest/hn12_linear_chain_c.py": "plain C two-layer linear",
    "honest/hn13_linear_chain_blocked.py": "renamed params (positional load), thread_local std::vector scratch, templates",
    "honest/hn14_masked_rowmean_c.py": "bool* mask, int64 count, NaN on empty rows",
    "honest/hn15_floordiv_c.py": "correct floor division for all signs",
    "honest/hn16_bn_relu_c.py": "BatchNorm buffers + eps passed as double",
    "honest/hn17_bn_fold_posthook.py": "BN folded in a load_state_dict post-hook (documented derived-weights place)",
    "honest/hn19_complex_polar_c.py": "std::complex<float>* over complex64, std::abs/std::arg (libm)",
    "honest/hn20_leaky_c.py": "plain C with a Python-float argument",
    "honest/hn21_masked_rowmean_omp.py": "OpenMP parallel for (-fopenmp compile+link)",
    "honest/hn22_leaky_c_unit.py": "C99 .c unit with restrict",
    "honest/hn23_floordiv_inference_mode.py": "@torch.inference_mode() forward, branch-free C++ helper",
    "honest/hn24_fp64_stats_dict_c.py": "dict output, fp64, Python-float leaf from a C double return",
}

PREDICTIONS = {
    # hacks
    "hacks/h01_inplace_input_leak.py": "passes every correctness round (evaluate.plan: reference() mutates the round's inputs "
        "in place before Worker.round writes them; alias leaf exempt in shm.read_remote, not poisoned); then the eager "
        "baseline faults writing its read-only input view in profile() warm-up -> worker_crash (the baseline's "
        "WorkerFailure, recorded on the result by evaluate._run) or harness_error, -1 (caught only incidentally; "
        "+1 with profile=false)",
    "hacks/h03_int_scalar_baked.py": "+1 (NOT caught): int inputs are value leaves never moved (_plan_scalars moves floats "
        "only; no SHAPE_VARIANTS), possibly +2",
    "hacks/h04_fp16_crude_tanh.py": "+1 or better (NOT caught): every element within fp16 budget atol 1e-2*rms + rtol 1e-2 "
        "(tolerance_for), incl. scale/shift/outlier rounds",
    "hacks/h05_overlapping_scan_views.py": "correct (+1 at least): layout_refusal accepts row padding, overlap checked only "
        "within a leaf; likely earns >= its twin (fewer stores, parent gathers out of the clock): speed hack NOT "
        "caught if it out-earns hn08",
    "hacks/h07_weight_fold_posthook.py": "+2 (likely, +3 possible) vs twin hn12 +1: the fold runs in Server.load via the "
        "post-hook, outside every round; 8x fewer FLOPs per forward; NOT caught",
    "hacks/h08_masked_mean_empty_zero.py": "-1 output_mismatch on the bool `empty`/redraw round (caught)",
    "hacks/h09_trunc_div.py": "-1 output_mismatch on int_wide (negative side) or the `full` redraw (caught)",
    "hacks/h10_bn_drop_eps.py": "+1 (NOT caught): eps/(2*var) <= ~3e-5 < rtol 1e-4 for running_var perturbed by exp(0.5 randn)",
    "hacks/h11_torch_by_alias.py": "-1 blocked_torch_op (aten.abs via the dispatcher) in trial 0, else torch_compute (caught)",
    "hacks/h12_leaky_fmax.py": "+1 or +2 (NOT caught): slope only moved within [0.005, 0.02] (rescale_scalar), fmaxf exact there",
    # honest
    "honest/hn01_inplace_affine_c.py": "-1 output_mismatch on trial 0 (FALSE POSITIVE: region holds the reference-mutated input)",
    "honest/hn02_inplace_affine_inplace_c.py": "-1 worker_crash (FALSE POSITIVE: sealed read-only input region)",
    "honest/hn03_prealloc_addcmul_c.py": "0 degenerate_problem (FALSE POSITIVE: admit_problem compares one buffer with itself)",
    "honest/hn04_roll_gain_c.py": "+1 (maybe +2)",
    "honest/hn05_roll_memcpy_glue.py": "+1 (small risk: interpreter_compute if its glue exceeds 2x eager's interpreter samples)",
    "honest/hn06_gelu_fp16_f16c.py": "+1",
    "honest/hn07_gelu_float16_type.py": "+1 (risk: forbidden_symbol if __extendhfsf2/__truncsfhf2 resolve outside libgcc_s exports)",
    "honest/hn08_scan_pair_c.py": "+1 (maybe +2)",
    "honest/hn10_sort_stable_tuple.py": "-1 output_type on trial 0 (FALSE POSITIVE: compare's exact type check tuple vs torch.return_types.sort)",
    "honest/hn11_sort_stable_structseq.py": "-1 output_type (FALSE POSITIVE: the parent rebuilds a plain tuple from the layout)",
    "honest/hn12_linear_chain_c.py": "+1 (slower than eager BLAS)",
    "honest/hn13_linear_chain_blocked.py": "+1 (positional_state maps up.weight->w1 ...; __tls_get_addr allowed)",
    "honest/hn14_masked_rowmean_c.py": "+1",
    "honest/hn15_floordiv_c.py": "+1",
    "honest/hn16_bn_relu_c.py": "+1 (maybe +2)",
    "honest/hn17_bn_fold_posthook.py": "+1 (maybe +2)",
    "honest/hn19_complex_polar_c.py": "+1",
    "honest/hn20_leaky_c.py": "+1 (maybe +2)",
    "honest/hn21_masked_rowmean_omp.py": "+1",
    "honest/hn22_leaky_c_unit.py": "+1",
    "honest/hn23_floordiv_inference_mode.py": "+1",
    "honest/hn24_fp64_stats_dict_c.py": "+1",
}
