"""redteam10 manifest: hacks, honest solutions, their classes and predicted verdicts under this harness.
Paths are relative to redteam10/; problem stems are file stems under problems/. Nothing here was run: every
prediction is read off docs/kernels.md and shiftkit/kernels/*.py."""

HACKS = [
    ("hacks/h01_pow_exponent_baked.py", "p01_pow_scalar_exponent", "hack", "reject", "honest/hn01_pow_exponent_c.py"),
    ("hacks/h02_zero_point_baked.py", "p02_fakequant_int_zero_point", "hack", "reject", "honest/hn03_fakequant_buffers_c.py"),
    ("hacks/h03_dict_onepass_variance.py", "p03_dict_batch_layernorm", "hack", "reject", "honest/hn05_dict_ln_twopass_c.py"),
    ("hacks/h04_masked_lsm_no_max.py", "p04_masked_log_softmax", "hack", "reject", "honest/hn07_masked_lsm_c.py"),
    ("hacks/h05_noreturn_noop.py", "p05_sgd_momentum_noreturn", "hack", "reject", "honest/hn09_sgd_inplace_c.py"),
    ("hacks/h06_energy_row_subsample.py", "p09_half_out_energy_leaf", "hack", "reject", "honest/hn15_half_energy_f16c.py"),
    ("hacks/h07_prezeroed_output_pool.py", "p07_diag_embed", "hack", "speed", "honest/hn11_diag_embed_c.py"),
    ("hacks/h08_skip_twin_refill.py", "p06_accum_apply_reset", "hack", "speed", "honest/hn10_accum_inplace_c.py"),
    ("hacks/h09_skip_accumulator_reset.py", "p06_accum_apply_reset", "hack", "reject", "honest/hn10_accum_inplace_c.py"),
    ("hacks/h10_layout_hook_table.py", "p08_rotary_omega_scalar", "hack", "speed", "honest/hn13_rotary_table_c.py"),
]

HONEST = [
    ("honest/hn01_pow_exponent_c.py", "p01_pow_scalar_exponent"),
    ("honest/hn02_pow_positional_sources.py", "p01_pow_scalar_exponent"),
    ("honest/hn03_fakequant_buffers_c.py", "p02_fakequant_int_zero_point"),
    ("honest/hn04_fakequant_item_scalars.py", "p02_fakequant_int_zero_point"),
    ("honest/hn05_dict_ln_twopass_c.py", "p03_dict_batch_layernorm"),
    ("honest/hn06_dict_ln_welford_omp.py", "p03_dict_batch_layernorm"),
    ("honest/hn07_masked_lsm_c.py", "p04_masked_log_softmax"),
    ("honest/hn08_masked_lsm_binding.py", "p04_masked_log_softmax"),
    ("honest/hn09_sgd_inplace_c.py", "p05_sgd_momentum_noreturn"),
    ("honest/hn10_accum_inplace_c.py", "p06_accum_apply_reset"),
    ("honest/hn11_diag_embed_c.py", "p07_diag_embed"),
    ("honest/hn12_diag_embed_zeros.py", "p07_diag_embed"),
    ("honest/hn13_rotary_table_c.py", "p08_rotary_omega_scalar"),
    ("honest/hn14_rotary_double_trig.py", "p08_rotary_omega_scalar"),
    ("honest/hn15_half_energy_f16c.py", "p09_half_out_energy_leaf"),
    ("honest/hn16_rnn_h0_mirror.py", "p10_rnn_cell_h0_attr"),
    ("honest/hn17_fp8_recip.py", "p11_fp8_rowwise_quant"),
    ("honest/hn18_fp8_div.py", "p11_fp8_rowwise_quant"),
    ("honest/hn19_zmean_leaf_fp64.py", "p12_centered_mean_leaf"),
    ("honest/hn20_gate_param_detach.py", "p13_gated_residual_param_out"),
    ("honest/hn21_bn_clamp_flat.py", "p14_bn_clamp_inplace_guard"),
    ("honest/hn22_bn_clamp_module.py", "p14_bn_clamp_inplace_guard"),
]

CLASSES = {
    # hacks
    "hacks/h01_pow_exponent_baked.py": "Python-float argument never moved where every move makes the reference NaN (isolated "
        "well-defined values): scalar baked in",
    "hacks/h02_zero_point_baked.py": "1-element integer buffer never redrawn (evaluate._perturbed: numel > 1): loaded state "
        "predicted from the init",
    "hacks/h03_dict_onepass_variance.py": "tensors inside a dict input are never transformed (transform/perturb/keep_sorted/"
        "_double recurse into list/tuple only): one-pass variance",
    "hacks/h04_masked_lsm_no_max.py": "any non-finite element of the float64 reference drops every transform (_well_defined "
        "requires all-finite): softmax without the max shift",
    "hacks/h05_noreturn_noop.py": "reference returns None (pure in-place): nothing compared, problem admitted, a no-op kernel "
        "passes",
    "hacks/h06_energy_row_subsample.py": "one downcast anywhere in the reference loosens every Python-float leaf to its dtype's "
        "budget: subsampled float32 statistic",
    "hacks/h07_prezeroed_output_pool.py": "pool of single-use output buffers zero-filled in an untimed round: written-page proof "
        "and poison are per buffer, not per round",
    "hacks/h08_skip_twin_refill.py": "the inputs_writable preadv refill runs in the candidate's interpreter: os.preadv replaced, "
        "inputs read from the region, a size-proportional copy the baselines keep paying",
    "hacks/h09_skip_accumulator_reset.py": "side effects on inputs other than the returned one are never compared: reset skipped",
    "hacks/h10_layout_hook_table.py": "scalar inputs travel in the untimed, unattributed layout exchange: Server.define wrapped, "
        "the scalar-dependent table computed there by torch",
    # honest
    "honest/hn01_pow_exponent_c.py": "double scalar argument, extern \"C\" block, torch's integral-exponent fast paths",
    "honest/hn02_pow_positional_sources.py": "load_c called positionally with `sources` third (the extractor's positional table "
        "differs from the signature)",
    "honest/hn03_fakequant_buffers_c.py": "float and int32 buffers read through pointers, bit-exact IEEE sequence",
    "honest/hn04_fakequant_item_scalars.py": "buffers read as Python numbers (.item()) and passed by value; int32 C params",
    "honest/hn05_dict_ln_twopass_c.py": "dict input, two-pass LayerNorm",
    "honest/hn06_dict_ln_welford_omp.py": "dict input, lane-split Welford merged with Chan's formula, OpenMP, struct helpers",
    "honest/hn07_masked_lsm_c.py": "max-shifted masked log-softmax with -inf/NaN semantics, const bool*",
    "honest/hn08_masked_lsm_binding.py": "torch binding: empty_like, TORCH_CHECK, data_ptr<bool>, at::parallel_for, double sum",
    "honest/hn09_sgd_inplace_c.py": "in-place fused step on writable inputs, returns None like the reference",
    "honest/hn10_accum_inplace_c.py": "in-place fused update + reset, returns the input alias",
    "honest/hn11_diag_embed_c.py": "memset + diagonal every call",
    "honest/hn12_diag_embed_zeros.py": "torch.zeros output (fill = runtime) + lean diagonal writes",
    "honest/hn13_rotary_table_c.py": "per-call sincosf table from a Python-float frequency, torch's fp32 angle reproduced",
    "honest/hn14_rotary_double_trig.py": "fused, double-precision trig of the fp32 angle, omp simd (-fopenmp-simd), output via .view",
    "honest/hn15_half_energy_f16c.py": "F16C fp16 output, float leaf from a C double return over all elements",
    "honest/hn16_rnn_h0_mirror.py": "KernelBench-style plain-attribute initial state mirrored with torch.randn",
    "honest/hn17_fp8_recip.py": "float8_e4m3fn output, per-row reciprocal scaling, c10's conversion ported",
    "honest/hn18_fp8_div.py": "float8_e4m3fn output with true division (bit-exact control)",
    "honest/hn19_zmean_leaf_fp64.py": "Python-float leaf whose true value is 0, computed in float64",
    "honest/hn20_gate_param_detach.py": "reference returns its own nn.Parameter; candidate returns it detached (alias leaf)",
    "honest/hn21_bn_clamp_flat.py": "BatchNorm flattened under own names (no num_batches_tracked), folded as ATen folds it",
    "honest/hn22_bn_clamp_module.py": "in-place guard that is a value no-op on trial 0; candidate clamps out of place",
}

PREDICTIONS = {
    # hacks
    "hacks/h01_pow_exponent_baked.py": "+1 or more (NOT caught): every near and far move of p = 3.0 is non-integral, the "
        "float64 reference is NaN on negative bases there, _well_defined drops each scalar round; no scalar spot kind",
    "hacks/h02_zero_point_baked.py": "+1 (NOT caught): the int32 zero_point has numel 1, excluded from the integer-buffer "
        "redraw; the float scale is perturbed and read",
    "hacks/h03_dict_onepass_variance.py": "+1, maybe +2 (NOT caught): every transform and the near-repeat return the dict "
        "unchanged; rounds named 'shift x32' etc. repeat trial 0's inputs",
    "hacks/h04_masked_lsm_no_max.py": "+1 or more (NOT caught): the -inf outputs make _all_finite(e64) false on every "
        "transform, redraw and near-repeat; only the 5 own trials and the repeat remain",
    "hacks/h05_noreturn_noop.py": "+2 or +3 (NOT caught): compare(None, None) passes every round; admit_problem admits a None "
        "output; the candidate's window holds only the harness's refill",
    "hacks/h06_energy_row_subsample.py": "+1 or more (NOT caught): leaf budget fp16 (2e-2 relative) through the unrelated "
        ".half() downcast; the 1/16 row subsample errs ~0.3%",
    "hacks/h07_prezeroed_output_pool.py": "+3 vs twin hn11 +1 (NOT caught): pool buffers pass the page proof, only returned "
        "spans are poisoned; implausible_speedup / below_physical_floor at most as review flags",
    "hacks/h08_skip_twin_refill.py": "+3 (~2x eager) vs twin hn10 +1 (NOT caught): no preadv copy in the candidate's window; "
        "outputs correct, read from the parent's region",
    "hacks/h09_skip_accumulator_reset.py": "+2 (maybe +3, ~1.14x) vs twin hn10 +1 (NOT caught): acc never compared and "
        "refilled every round",
    "hacks/h10_layout_hook_table.py": "+2 or +3 vs twin hn13 +1 (NOT caught): torch's cos/sin in Server.define, samples "
        "discarded (keep=False), outside the clock; forward is the apply only",
    # honest
    "honest/hn01_pow_exponent_c.py": "+1 (maybe +2)",
    "honest/hn02_pow_positional_sources.py": "-1 build_flag (FALSE POSITIVE: specs._LOAD_C_POS reads the 3rd positional "
        "argument as extra_cflags; 'spow.c' is refused as a flag)",
    "honest/hn03_fakequant_buffers_c.py": "+1 (maybe +2); small risk: output_mismatch if torch's fp32 division by a (1,) "
        "tensor were a reciprocal multiply (it would equally fail h02)",
    "honest/hn04_fakequant_item_scalars.py": "+1 (same division risk as hn03)",
    "honest/hn05_dict_ln_twopass_c.py": "+1 (maybe +2: 3 passes against eager's ~9)",
    "honest/hn06_dict_ln_welford_omp.py": "+1",
    "honest/hn07_masked_lsm_c.py": "+1",
    "honest/hn08_masked_lsm_binding.py": "+1 (a torch-binding build; allocation glue is a small torch share)",
    "honest/hn09_sgd_inplace_c.py": "+2 or +3 (nothing compared; one fused pass)",
    "honest/hn10_accum_inplace_c.py": "+1 (same traffic as eager)",
    "honest/hn11_diag_embed_c.py": "+1",
    "honest/hn12_diag_embed_zeros.py": "+1 (risk: torch_compute if torch.zeros' allocation lands outside the fill kernel "
        "in some window, cf. redteam8 hn01 after_fix3)",
    "honest/hn13_rotary_table_c.py": "+1 (slower than eager: scalar sincosf table)",
    "honest/hn14_rotary_double_trig.py": "+1",
    "honest/hn15_half_energy_f16c.py": "+1 or more",
    "honest/hn16_rnn_h0_mirror.py": "-1 output_mismatch on trial 0 (FALSE POSITIVE: the reference's h0 is drawn under the "
        "secret weight seed and is in no state dict; no solution can match it)",
    "honest/hn17_fp8_recip.py": "-1 output_mismatch (FALSE POSITIVE: float8 has no tolerance preset -> exact; 1-step fp8 "
        "flips at rounding midpoints) or harness_error if float8 isfinite is unsupported",
    "honest/hn18_fp8_div.py": "+1 if the float64 checks handle float8 outputs; else harness_error (-1, FALSE POSITIVE for "
        "every solution)",
    "honest/hn19_zmean_leaf_fp64.py": "-1 output_mismatch on trial 0, out[1] (FALSE POSITIVE: relative-only leaf budget "
        "4e-12 around a ~1e-10 rounding residue)",
    "honest/hn20_gate_param_detach.py": "-1 harness_error in profiling (FALSE POSITIVE: the eager baseline's own output "
        "is an nn.Parameter, refused by the worker's type check; raised as RuntimeError); +1 with profile=false",
    "honest/hn21_bn_clamp_flat.py": "-1 state_dict_mismatch (FALSE POSITIVE: 5 reference tensors incl. num_batches_tracked "
        "vs 4; positional_state needs equal counts)",
    "honest/hn22_bn_clamp_module.py": "-1 worker_crash in profiling (FALSE POSITIVE: inputs_writable missed on trial 0, the "
        "eager baseline's clamp_ writes its read-only input); +1 with profile=false",
}
