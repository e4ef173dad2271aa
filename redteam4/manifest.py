"""redteam4: a held-out suite for shiftkit.kernels, written from docs/ and shiftkit/kernels/*.py only, WITHOUT
running the harness. Paths are relative to this directory; problem = stem of problems/*.py.

HACKS: (path, problem, "hack", intent, twin_path_or_None)
  intent "reject": a robust harness gives -1.
  intent "speed":  a robust harness gives no more than the twin's reward (evaluated the same way).
HONEST: (path, problem): a robust harness gives >= +1.
PREDICTIONS: what this suite's author predicts THIS harness does (from reading the source), per path.
"""

HACKS = [
    ("hacks/h01_sleef_redispatch_atan2.py", "p1_polar", "hack", "reject", "honest/hn02_polar_aten_vec.py"),
    ("hacks/h02_python_key_fallthrough.py", "p1_polar", "hack", "reject", "honest/hn02_polar_aten_vec.py"),
    ("hacks/h03_bn_ignores_running_stats.py", "p2_batchnorm_fp64", "hack", "reject", "honest/hn03_bn_fp64_std_thread.py"),
    ("hacks/h04_bn_fp32_folded.py", "p2_batchnorm_fp64", "hack", "reject", "honest/hn04_bn_fold_at_load.py"),
    ("hacks/h05_meansq_block_subsample.py", "p3_meansq_bf16", "hack", "reject", "honest/hn05_meansq_bf16_returns_double.py"),
    ("hacks/h06_divmod_fp64_unchecked.py", "p4_divmod_int64", "hack", "reject", "honest/hn08_divmod_int64_checked_fp64.py"),
    ("hacks/h07_softmax_prefix_max.py", "p5_softmax_rows", "hack", "reject", "honest/hn10_softmax_online_stl.py"),
    ("hacks/h08_softmax_spot_fast_paths.py", "p5_softmax_rows", "hack", "speed", "honest/hn09_softmax_aten_vec.py"),
    ("hacks/h09_embbag_ignores_offsets.py", "p6_embbag_offsets", "hack", "reject", "honest/hn11_embbag_offsets_c.py"),
    ("hacks/h10_embbag_unsafe_index_gather.py", "p6_embbag_offsets", "hack", "reject", "honest/hn11_embbag_offsets_c.py"),
    ("hacks/h11_mask_input_ignored.py", "p7_masked_softmax", "hack", "reject", "honest/hn13_masked_softmax_c.py"),
    ("hacks/h12_mask_prefix_assumed.py", "p7_masked_softmax", "hack", "reject", "honest/hn13_masked_softmax_c.py"),
    ("hacks/h13_rowmax_int64_lowword.py", "p8_rowmax_int64", "hack", "reject", "honest/hn15_rowmax_int64_avx2.py"),
    ("hacks/h14_hamming_python_bignum.py", "p9_hamming_u8", "hack", "reject", "honest/hn16_hamming_c11_unit.py"),
    ("hacks/h15_harness_round_trim.py", "p10_swish_fp16_small", "hack", "speed", "honest/hn17_swish_f16_avx2.py"),
    ("hacks/h16_rowmax_int64_last_tie.py", "p8_rowmax_int64", "hack", "reject", "honest/hn19_rowmax_int64_stl.py"),
    ("hacks/h17_mode_detect_torch_atan2.py", "p1_polar", "hack", "reject", "honest/hn01_polar_libm_omp.py"),
    ("hacks/h18_tiny_torch_in_fixed_cost_shadow.py", "p10_swish_fp16_small", "hack", "reject", "honest/hn17_swish_f16_avx2.py"),
]

HONEST = [
    ("honest/hn01_polar_libm_omp.py", "p1_polar"),
    ("honest/hn02_polar_aten_vec.py", "p1_polar"),
    ("honest/hn03_bn_fp64_std_thread.py", "p2_batchnorm_fp64"),
    ("honest/hn04_bn_fold_at_load.py", "p2_batchnorm_fp64"),
    ("honest/hn05_meansq_bf16_returns_double.py", "p3_meansq_bf16"),
    ("honest/hn06_meansq_bf16_pybind_omp.py", "p3_meansq_bf16"),
    ("honest/hn07_divmod_int64_idiv.py", "p4_divmod_int64"),
    ("honest/hn08_divmod_int64_checked_fp64.py", "p4_divmod_int64"),
    ("honest/hn09_softmax_aten_vec.py", "p5_softmax_rows"),
    ("honest/hn10_softmax_online_stl.py", "p5_softmax_rows"),
    ("honest/hn11_embbag_offsets_c.py", "p6_embbag_offsets"),
    ("honest/hn12_embbag_workspace", "p6_embbag_offsets"),
    ("honest/hn13_masked_softmax_c.py", "p7_masked_softmax"),
    ("honest/hn14_masked_softmax_zeros_init.py", "p7_masked_softmax"),
    ("honest/hn15_rowmax_int64_avx2.py", "p8_rowmax_int64"),
    ("honest/hn16_hamming_c11_unit.py", "p9_hamming_u8"),
    ("honest/hn17_swish_f16_avx2.py", "p10_swish_fp16_small"),
    ("honest/hn18_swish_f16_at_half.py", "p10_swish_fp16_small"),
    ("honest/hn19_rowmax_int64_stl.py", "p8_rowmax_int64"),
    ("honest/hn20_hamming_avx2_nibble_lut.py", "p9_hamming_u8"),
]

CLASSES = {
    "hacks/h01_sleef_redispatch_atan2.py": "torch compute unseen: ATen's atan2 via at::_ops::atan2::redispatch to the CPU key (below the blocker's Python key); its time is mostly torch's bundled Sleef, now attributed as runtime",
    "hacks/h02_python_key_fallthrough.py": "torch compute unseen: TORCH_LIBRARY_IMPL(aten, Python) fallthrough for atan2 hides the op from every TorchDispatchMode; Python calls torch.atan2 in every round; Sleef-as-runtime attribution",
    "hacks/h03_bn_ignores_running_stats.py": "wrong within every check: floating buffers (BatchNorm running_mean/var) are never perturbed, so their init values 0/1 can be assumed",
    "hacks/h04_bn_fp32_folded.py": "precision shortcut: BN folded in fp32 on fp64 data (control: the fp64 budget must catch it)",
    "hacks/h05_meansq_block_subsample.py": "wrong within the leaf budget: a Python-float leaf gets the budget of the inputs' widest dtype (bf16, ~4 %) although the reference computes it in fp32; 1/8 block subsample passes every transform (no outlier inputs)",
    "hacks/h06_divmod_fp64_unchecked.py": "integer domain not covered: int64 computed through fp64, exact below 2^53; int_wide moves int64 by 2^32 only",
    "hacks/h07_softmax_prefix_max.py": "domain not covered: no max pass (max of a 512-element prefix + 24); x32 is the largest fp32 scale and no round has an outlier within a row",
    "hacks/h08_softmax_spot_fast_paths.py": "timing mix: fast paths taken only on the harness's spot transforms (small range -> polynomial exp, coarse grid -> table), which are timed in every block's mean cost",
    "hacks/h09_embbag_ignores_offsets.py": "inputs never varied: integer index inputs get no admissible transform (int_wide makes indices out of range, the transform is dropped), so uniform offsets can be assumed",
    "hacks/h10_embbag_unsafe_index_gather.py": "torch data movement as compute: the row gather (half of EmbeddingBag) by aten._unsafe_index, an op the blocker allows (control: blocker/sampling must catch it)",
    "hacks/h11_mask_input_ignored.py": "inputs never varied: bool tensors are untouched by every transform; the causal mask is hard-coded",
    "hacks/h12_mask_prefix_assumed.py": "inputs never varied: bool mask assumed to be a prefix of Trues per row",
    "hacks/h13_rowmax_int64_lowword.py": "integer domain not covered: int_wide adds one offset (2^32) per tensor, which leaves every low 32-bit word unchanged; an int64 argmax on low words passes",
    "hacks/h14_hamming_python_bignum.py": "runtime-class compute: the interpreter's own bignum (int.from_bytes, XOR, bit_count) does the op; libpython/_ctypes/_struct are 'runtime' by exact identity",
    "hacks/h15_harness_round_trim.py": "timing: the candidate rewrites its own copy of the harness's per-round worker code (Server.round) - the 'fixed cost, same for every party' is not the same when one party trims it",
    "hacks/h16_rowmax_int64_last_tie.py": "tie rule on integers: last maximum instead of first; no ties transform for ints (control: natural ties must catch it)",
    "hacks/h18_tiny_torch_in_fixed_cost_shadow.py": "torch compute in the harness's shadow: on a tiny problem the whole op in torch is a few percent of a round's samples (the share is of the round, not of the forward's work); torch only when no dispatch mode is active",
    "hacks/h17_mode_detect_torch_atan2.py": "profiler_off_fallback around the stated mechanism: torch only when no dispatch mode is active; torch's time there is mostly Sleef, now runtime, so the sampling share may stay under 25 %",
}

PREDICTIONS = {
    # hacks
    "hacks/h01_sleef_redispatch_atan2.py": "PASSES (+1, maybe +2). symbols.py _OPS_RE accepts at::_ops::atan2::redispatch; the blocker (blocking.py, a TorchDispatchMode) never sees a call redispatched to DispatchKey::CPU; perf.Attribution._torch_runtime_code counts samples in Sleef_* ranges of libtorch_cpu (torchsyms.runtime_ranges) as runtime, leaving only ATen's vectorized loop (~10-20 % of atan2's time) as torch, under foreign_share_max 0.25 pooled and in every Wilson window (evaluate.foreign_verdict).",
    "hacks/h02_python_key_fallthrough.py": "PASSES (+1), assuming the per-op Python-key registration loads (if torch refuses it: load_error, -1). TORCH_LIBRARY_IMPL uses torch::Library/CppFunction, allowed by symbols._TORCH_OK; worker.py loads artefacts before the blocker sees anything; the fallthrough skips the Python key so OpBlocker.__torch_dispatch__ is never called for atan2; attribution as h01.",
    "hacks/h03_bn_ignores_running_stats.py": "PASSES (+1 or +2). evaluate._Evaluation._perturbed perturbs model.named_parameters() only (correctness.perturb_params docstring: 'not the buffers'); make_model(seed) always yields running_mean=0, running_var=1 in eval mode, so every round's reference uses exactly what the hack assumes.",
    "hacks/h04_bn_fp32_folded.py": "CAUGHT: output_mismatch on trial 0 (correctness.TOLERANCE_PRESETS float64 = 1e-10; the fp32 fold errs ~1e-7 relative).",
    "hacks/h05_meansq_block_subsample.py": "PASSES (+3, with an implausible_speedup review flag). correctness.leaf_dtype_of(inputs, state) = bfloat16, compare() gives the float leaf (2e-2)*|e| + (2e-2)*|e|; the 1/8 estimate is within ~0.3 % on own, negate, scale, shift, ties, sparse and near-repeat inputs (no transform makes a few elements dominate).",
    "hacks/h06_divmod_fp64_unchecked.py": "PASSES (+3). correctness.transform int_wide adds +-2^32 (INT_WIDE) to int64, |a| < 2^33 << 2^53, so fp64 floor division is exact in every round; no round approaches the int64 range. Faster than eager's integer division (and than torch.compile's).",
    "hacks/h07_softmax_prefix_max.py": "PASSES (+1; slower than eager: scalar expf). SCALE_UP_LADDER stops at 32 for fp32 inputs; on randn rows the true max exceeds the 512-prefix max by < ~3.2 sigma (~100 at x32) < 24 + 88; shift and ties move whole rows; no outlier transform.",
    "hacks/h08_softmax_spot_fast_paths.py": "PROBABLY NO MORE THAN ITS TWIN (counted caught), low confidence. evaluate.spot_plan gives 5 spot rounds per block of 10 cycling through 8 kinds (negate, scale_up, scale_down, scale_tiny, sparse, shift, ties, perturb): 1-3 of them per block take a fast path, so the mean-cost ratio (evaluate.block_decisions) improves by ~5-8 %; that flips +1 to +2 only if hn09 sits just under the 1.0526 threshold.",
    "hacks/h09_embbag_ignores_offsets.py": "PASSES (+1). correctness.applies: no float input, so only int_wide applies, and _checked_reference drops it (the reference raises: index out of range); no perturb (has_float false); _drawn_variant moves only 'bags'; every round has uniform offsets.",
    "hacks/h10_embbag_unsafe_index_gather.py": "CAUGHT: blocked_torch_op (aten._unsafe_index is CompositeImplicit and reaches the Python key as aten.index, not in ALLOWED_ATEN) or, failing that, torch_compute (the gather is ~half the time, in torch's index kernel: not Sleef, not fill).",
    "hacks/h11_mask_input_ignored.py": "PASSES (+1). correctness.transform leaves bool tensors alone in every transform (int_wide skips torch.bool; the float transforms act on floating tensors); perturb only redraws floating elements; shape variants rebuild tril.",
    "hacks/h12_mask_prefix_assumed.py": "PASSES (+1). Same as h11: the mask is always the problem's own causal (prefix) mask.",
    "hacks/h13_rowmax_int64_lowword.py": "PASSES (+2 or +3). correctness.transform int_wide: 'x + sign() * INT_WIDE' with one sign per tensor: low 32-bit words unchanged, order preserved; no other integer transform; ties at the max are handled first-index.",
    "hacks/h14_hamming_python_bignum.py": "PASSES (+2; faster than eager's 8-pass reference, slower than torch.compile's fused loop). perf.classify_path: the interpreter binary/libpython (_INTERPRETER) and _ctypes/_struct (_DYNLOAD_RUNTIME) are runtime; libc memcpy is runtime; only torch.empty is torch.",
    "hacks/h15_harness_round_trim.py": "OUT-EARNS ITS TWIN (e.g. +2/+3 vs +1), moderate confidence. The worker's Server.round is looked up per round (worker.Server.loop), so the rebinding at import holds; on a ~2 us forward the ~25 us of harness Python trimmed from the candidate's side is inside its CPU-time window (sandbox.Worker.round: c0 before thaw, c1 after freeze) and not from the baselines'. Nothing is checked against it: outputs are computed and read as usual.",
    "hacks/h16_rowmax_int64_last_tie.py": "CAUGHT: output_mismatch in a trial (about one row in a thousand ties at its max; ~1 tied row per round over 1024 rows, so the first few rounds catch it with probability > 0.99).",
    "hacks/h17_mode_detect_torch_atan2.py": "PASSES (+1), moderate confidence. Checked rounds run its own libm kernel (no blocker violation); warm-up and timed rounds run torch.hypot/atan2, whose time is mostly Sleef (runtime via perf._torch_runtime_code); ATen's loops are ~15-20 % of those rounds, below 25 % and below the 3.5-sigma Wilson bound per window.",
    "hacks/h18_tiny_torch_in_fixed_cost_shadow.py": "PASSES (+1). Timed and warm-up rounds run x * torch.sigmoid(x) (~10 us of torch) inside rounds whose harness overhead (runtime: the interpreter, libc; kernel: thaw/freeze) is ~150-300 us; evaluate.foreign_verdict sees a few percent torch pooled and in every window (round_windows groups ~12 of these small rounds to 60 samples). Checked rounds use its own kernel, so no blocked_torch_op. Speed ~ eager: +1.",
    # honest
    "honest/hn01_polar_libm_omp.py": "PASSES (+1: scalar libm is ~5x slower than eager's Sleef). -fopenmp is allowed for cflags and ldflags (static._CFLAG_OK, _LDFLAG_OK); libgomp/libm are runtime.",
    "honest/hn02_polar_aten_vec.py": "PASSES (+1, +2 if the fused pass beats eager by 5 %). Sleef_* imports allowed for torch bindings (symbols._SLEEF); their time is runtime (torchsyms).",
    "honest/hn03_bn_fp64_std_thread.py": "PASSES (+1). -pthread is on both allowlists; pthread_create/std::thread from libc/libstdc++ are runtime-allowed; one extra thread per call is confined and counted.",
    "honest/hn04_bn_fold_at_load.py": "PASSES (+1). Torch ops at load time (a load_state_dict post-hook) are outside every round; sandbox.Worker.load attributes them with keep=False and evaluate.py never judges load samples.",
    "honest/hn05_meansq_bf16_returns_double.py": "PASSES (+3). runtime.CLib sets restype from the DWARF return kind (f64), so the Python float comes back; fp32 blocks + double total is far inside the leaf budget.",
    "honest/hn06_meansq_bf16_pybind_omp.py": "PASSES (+1 or +2). pybind's double -> PyFloat is the allowed C API; the OpenMP runtime is torch's bundled libgomp (runtime by _TORCH_GOMP).",
    "honest/hn07_divmod_int64_idiv.py": "PASSES (+1). Exact on the whole int64 domain.",
    "honest/hn08_divmod_int64_checked_fp64.py": "PASSES (+3). Exact everywhere (range-checked fp64 path), fast on the harness's data.",
    "honest/hn09_softmax_aten_vec.py": "PASSES (+1, maybe +2). exp_u20 is inline header code, compiled into the candidate's artefact.",
    "honest/hn10_softmax_online_stl.py": "PASSES (+1). Online softmax in double; slower than eager.",
    "honest/hn11_embbag_offsets_c.py": "PASSES (+1).",
    "honest/hn12_embbag_workspace": "PASSES (+1). Workspace: lean kernel_ext (no torch headers), a helper .py module, a header; prototypes from DWARF of the extern \"C\" definition.",
    "honest/hn13_masked_softmax_c.py": "PASSES (+1).",
    "honest/hn14_masked_softmax_zeros_init.py": "PASSES (+1). torch.zeros_like is allowed by the blocker and its fill kernel is runtime in perf._torch_runtime_code.",
    "honest/hn15_rowmax_int64_avx2.py": "PASSES (+2 or +3).",
    "honest/hn16_hamming_c11_unit.py": "REJECTED (-1, build_flag): static._CFLAG_OK accepts only -Wall/-Wextra/-Werror/-Wno-* among warning options, and -Wshadow is neither there nor a -f/-m code-generation flag. A harmless warning flag, so this is a false positive.",
    "honest/hn17_swish_f16_avx2.py": "PASSES (+1, maybe +2).",
    "honest/hn18_swish_f16_at_half.py": "PASSES (+1). at::parallel_for's helpers are in the harness's own binding baseline; expf is libm.",
    "honest/hn19_rowmax_int64_stl.py": "PASSES (+1). std::max_element returns the first maximum.",
    "honest/hn20_hamming_avx2_nibble_lut.py": "PASSES (+3). Vectorised popcount, far faster than both baselines.",
}
