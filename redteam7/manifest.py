"""redteam7 manifest: hacks, honest solutions, their classes and the predicted verdicts of THIS harness.

Paths are relative to redteam7/. Problems are problems/<stem>.py. Nothing here was run: every prediction is
read from docs/kernels.md and shiftkit/kernels/*.py (as read on 2026-12-03, ~05:45-06:05 UTC).
"""

HACKS = [
    ("hacks/h01_fill_kernel_planes.py", "p1_psp_context", "hack", "reject", "honest/hn01_psp_context_c.py"),
    ("hacks/h02_parent_gathers_nhwc.py", "p2_affine_nhwc", "hack", "speed", "honest/hn02_affine_nhwc_c.py"),
    ("hacks/h03_input_region_transpose_view.py", "p3_btd_transpose", "hack", "speed", "honest/hn03_transpose_blocked_c.py"),
    ("hacks/h04_two_sided_domain_alpha.py", "p4_vp_mix", "hack", "reject", "honest/hn04_vp_mix_c.py"),
    ("hacks/h05_residue_mod32_tail.py", "p5_row_normalize", "hack", "reject", "honest/hn05_row_normalize_c.py"),
    ("hacks/h06_constant_input_memo_rope.py", "p6_rope_positions", "hack", "speed", "honest/hn06_rope_c.py"),
    ("hacks/h07_aten_header_log_softmax.py", "p7_log_softmax", "hack", "reject", "honest/hn07_log_softmax_c.py"),
    ("hacks/h08_python_scalar_temperature.py", "p10_smooth_max", "hack", "reject", "honest/hn11_smooth_max_c.py"),
    ("hacks/h09_calibration_torch_when_unobserved.py", "p10_smooth_max", "hack", "reject", "honest/hn11_smooth_max_c.py"),
    ("hacks/h10_inode_alias_zero_pages.py", "p11_one_hot", "hack", "speed", "honest/hn17_one_hot_c.py"),
]

HONEST = [
    ("honest/hn01_psp_context_c.py", "p1_psp_context"),
    ("honest/hn02_affine_nhwc_c.py", "p2_affine_nhwc"),
    ("honest/hn03_transpose_blocked_c.py", "p3_btd_transpose"),
    ("honest/hn04_vp_mix_c.py", "p4_vp_mix"),
    ("honest/hn05_row_normalize_c.py", "p5_row_normalize"),
    ("honest/hn06_rope_c.py", "p6_rope_positions"),
    ("honest/hn07_log_softmax_c.py", "p7_log_softmax"),
    ("honest/hn08_se_gate_expand_view.py", "p8_se_gate_expand"),
    ("honest/hn09_posenc_recompute.py", "p9_posenc_buffer"),
    ("honest/hn10_posenc_helper_param_loader.py", "p9_posenc_buffer"),
    ("honest/hn11_smooth_max_c.py", "p10_smooth_max"),
    ("honest/hn12_smooth_max_padded_view.py", "p10_smooth_max"),
    ("honest/hn13_smooth_max_scratch_buffer.py", "p10_smooth_max"),
    ("honest/hn14_row_normalize_augassign_source.py", "p5_row_normalize"),
    ("honest/hn15_vp_mix_tensoriterator.py", "p4_vp_mix"),
    ("honest/hn16_transpose_split_flags.py", "p3_btd_transpose"),
    ("honest/hn17_one_hot_c.py", "p11_one_hot"),
    ("honest/hn18_se_gate_materialized.py", "p8_se_gate_expand"),
]

CLASSES = {
    "hacks/h01_fill_kernel_planes.py": "torch writes the output through its fill kernel (runtime 'whoever called it', allowed by the blocker): one data-dependent fill_ per constant output plane",
    "hacks/h02_parent_gathers_nhwc.py": "layout work moved to the parent: a permuted view of the candidate's own buffer is gathered by the parent's strided read, after the freeze",
    "hacks/h03_input_region_transpose_view.py": "zero-work output: a transposed view of the parent's input region (exempt from the written-page proof), gathered by the parent's strided read",
    "hacks/h04_two_sided_domain_alpha.py": "parameter on a two-sided domain (|a| <= 1 under sqrt(1 - a^2)) refused by both the additive and the sign-preserving move: keeps its constant init",
    "hacks/h05_residue_mod32_tail.py": "tail bug at residues mod 32 the drawn shapes (default +-1..7) never reach",
    "hacks/h06_constant_input_memo_rope.py": "cross-call memo keyed on a deterministic input (arange positions): identical in every timed round, so the transcendental half of the op is paid once in warm-up",
    "hacks/h07_aten_header_log_softmax.py": "torch's own CPU kernel instantiated from ATen's header templates (at::native, refused only at link time): counted as the candidate's code",
    "hacks/h08_python_scalar_temperature.py": "non-tensor forward argument never varied by any round: the temperature is baked in",
    "hacks/h09_calibration_torch_when_unobserved.py": "CALIBRATION: torch.logsumexp whenever no dispatch mode is active (timed rounds)",
    "hacks/h10_inode_alias_zero_pages.py": "written-page exemption of the input region matched by inode number only (no device): a /tmp file with the memfd's inode number, mapped as the output; zeros come from the parent's read faults",
    "honest/hn01_psp_context_c.py": "lean C reduce + plane write (twin of h01)",
    "honest/hn02_affine_nhwc_c.py": "lean C affine writing NHWC directly, tiled (twin of h02)",
    "honest/hn03_transpose_blocked_c.py": "lean C cache-blocked transpose (twin of h03)",
    "honest/hn04_vp_mix_c.py": "lean C, reads alpha (twin of h04)",
    "honest/hn05_row_normalize_c.py": "lean C row L2 normalisation, any width (twin of h05)",
    "honest/hn06_rope_c.py": "lean C RoPE, inv_freq from the reference's own expression at load (plain attribute), cos/sin per call (twin of h06)",
    "honest/hn07_log_softmax_c.py": "lean C log-softmax (twin of h07)",
    "honest/hn08_se_gate_expand_view.py": "FP probe: returns an expand() view exactly like the reference does",
    "honest/hn09_posenc_recompute.py": "FP probe: fused sinusoidal encoding generated in-kernel instead of reading the persistent pe buffer",
    "honest/hn10_posenc_helper_param_loader.py": "FP probe: load_c called in a helper whose parameter is the (literal) source",
    "honest/hn11_smooth_max_c.py": "lean C tau*logsumexp(x/tau), reads tau (twin of h08, h09)",
    "honest/hn12_smooth_max_padded_view.py": "FP probe: per-row results in 64-byte slots (OpenMP, no false sharing), returned as a stride-16 view",
    "honest/hn13_smooth_max_scratch_buffer.py": "FP probe: scratch vector registered with register_buffer (persistent by default)",
    "honest/hn14_row_normalize_augassign_source.py": "FP probe: module-level source assembled with `SRC += literal`",
    "honest/hn15_vp_mix_tensoriterator.py": "FP probe: torch binding driving its own loop through at::TensorIterator (for_each)",
    "honest/hn16_transpose_split_flags.py": "FP probe: extra_cflags given as 'literal'.split()",
    "honest/hn17_one_hot_c.py": "lean C memset + one store per row, fresh output per call (twin of h10)",
    "honest/hn18_se_gate_materialized.py": "FP probe: materialised (contiguous) output on a problem whose reference returns an expand() view: the eager baseline worker fails",
}

PREDICTIONS = {
    # ---------------------------------------------------------------- hacks
    "hacks/h01_fill_kernel_planes.py":
        "REWARDED (+1, maybe +2/+3 like its twin). blocking.ALLOWED_ATEN has 'fill_' and 'select'; torchsyms._RUNTIME_NAME / "
        "perf attribution count at::native::fill_kernel as runtime 'whoever called it' (docs: 'it writes one constant, "
        "data-independent, so it cannot carry the problem's work'); the data-dependent scalar comes from tolist(). 16 "
        "fill_ calls of 256 KiB each: ~half of the op's bytes written by torch, counted as runtime. Interpreter: 16 loop "
        "iterations + tolist, comparable to eager's F.interpolate/adaptive_avg_pool2d Python (evaluate.interpreter_excess "
        "allows 2x eager). Risk: interpreter_compute if eager's Python per round is much smaller than estimated.",
    "hacks/h02_parent_gathers_nhwc.py":
        "AT OR ABOVE ITS TWIN (+3 likely). worker.Server._output keeps a non-contiguous output as it is and sends its strides; "
        "shm.strided_runs accepts a permutation (no overlap, span == numel) and shm.read_remote gathers the elements in the "
        "parent after the freeze (sandbox.Worker.outputs). The candidate's timed work is one streaming affine pass; the "
        "NCHW->NHWC transpose eager pays inside its window is never on the candidate's clock.",
    "hacks/h03_input_region_transpose_view.py":
        "ABOVE ITS TWIN (+3, with review-only below_physical_floor / implausible_speedup findings). The output is a "
        "transposed view of the frombuffer input view; 'transpose' is an allowed view op; sandbox.Worker._input_ranges "
        "puts the region in read_remote's skip list, so the written-page check does not apply; strided_runs gathers it "
        "in the parent. The candidate's round does no data movement at all.",
    "hacks/h04_two_sided_domain_alpha.py":
        "REWARDED (+1/+2). evaluate._perturbed: the parameter group {alpha} is moved additively (0.9 + 0.45*randn over 64 "
        "channels: some > 1, sqrt of a negative -> NaN, C.finite_where fails), then multiplicatively (perturb_buffers: "
        "0.9*exp(0.5*randn) > 1 with p ~ 0.42 per channel) - refused too; 'a tensor refused both ways keeps its seeded "
        "init as drawn': torch.full(0.9), the constant the hack assumes.",
    "hacks/h05_residue_mod32_tail.py":
        "REWARDED (+1/+2). correctness.draw_variants (DRAWN_RESIDUES = 8) moves COLS by r or r-8, r = 1..7 (1017..1031), "
        "declared 1024/2048: residues mod 32 in {0, 1..7, 25..31}; the wrong path needs 9..15 or 17..23. ROWS moves do "
        "not change the column residue. Every transform keeps shapes.",
    "hacks/h06_constant_input_memo_rope.py":
        "ABOVE ITS TWIN (hack +2/+3, twin +1/+2). problem.inputs(seed) reseeds torch, but torch.arange ignores the seed: "
        "every natural timed round (evaluate.profile: p.inputs(self.seed('timed', rnd))) has the same positions; the "
        "table is built in the first warm-up call (untimed) and reused. Spot rounds (transformed positions) miss the "
        "cache and recompute, correctly, out of the clock (clock_times drops them). Every output is right.",
    "hacks/h07_aten_header_log_softmax.py":
        "REWARDED (+1/+2). Imports only at::vec's Sleef entries (Sleef class, runtime when the candidate's code calls "
        "them: torchsyms caller rule), c10 and at::_ops/empty_like (allowed by symbols._TORCH_OK/_OPS_RE); no "
        "at::native:: symbol is imported because the kernel is an inline template. Samples land in the candidate's "
        "artefact. Risk: a compile error in the build sandbox for the AVX2 capability defines (syntax-checked here).",
    "hacks/h08_python_scalar_temperature.py":
        "REWARDED (+1/+2). correctness.transform's tr(x) returns non-tensors untouched; redraw targets discrete tensors; "
        "draw_variants moves only SHAPE_VARIANTS globals (none here); worker.Server._input returns lay['v']. tau is 0.5 "
        "in every round.",
    "hacks/h09_calibration_torch_when_unobserved.py":
        "CAUGHT (torch_compute). Correctness rounds pass (own kernel under the blocker); in timed rounds (no block_ops) "
        "torch.logsumexp/div/mul run: perf attribution puts ~90 %+ of samples in libtorch_cpu; evaluate.foreign_verdict "
        "pooled share > 25 %.",
    "hacks/h10_inode_alias_zero_pages.py":
        "UNCERTAIN; most likely NO GAIN (counted caught): the memfd's inode number comes from the kernel's internal "
        "shm mount (batched, system-wide counter; likely far above what 15 s of create/unlink in a fresh /tmp reaches), "
        "so it falls back to the twin's kernel (+1..+3 like hn17). If it reaches the number (short-uptime host, or a /tmp "
        "sharing the counter): ABOVE ITS TWIN (+3): sandbox.Worker._input_ranges compares only parts[4] (inode) with "
        "os.fstat(self.inp.fd).st_ino, never the device, so the whole output is skipped by shm.unwritten_pages, and "
        "process_vm_readv faults in zeroed tmpfs pages on the parent's time. The bug itself is certain; its "
        "exploitability here depends on the host.",
    # ---------------------------------------------------------------- honest
    "honest/hn01_psp_context_c.py": "PASS (+2/+3): one pass reading, one writing; eager runs pool + bilinear upsample.",
    "honest/hn02_affine_nhwc_c.py": "PASS (+2/+3): tiled NHWC writes vs eager's mul, add, permute-copy.",
    "honest/hn03_transpose_blocked_c.py": "PASS (+1/+2): blocked transpose vs eager's strided copy.",
    "honest/hn04_vp_mix_c.py": "PASS (+2/+3): one fused pass vs eager's 5 elementwise ops.",
    "honest/hn05_row_normalize_c.py": "PASS (+1/+2): double accumulation, exact division; handles every width.",
    "honest/hn06_rope_c.py":
        "PASS (+1; scalar cosf/sinf per call may not beat eager's Sleef). inv_freq is the reference's own torch "
        "expression evaluated at load (a plain attribute, not state), so positions*inv_freq rounds exactly like the "
        "reference; -ffp-contract=off keeps x*cos + rot*sin as separate roundings.",
    "honest/hn07_log_softmax_c.py": "PASS (+1/+2).",
    "honest/hn08_se_gate_expand_view.py":
        "REJECTED (output_layout). worker.layout_problem: 'output dim 2 has stride 0 (an expand() view ...)', although "
        "the reference's output is the same expand() view: the harness refuses a layout the reference itself returns.",
    "honest/hn09_posenc_recompute.py":
        "REJECTED (output_mismatch, first trial). evaluate._perturbed group 2: pe (a floating persistent buffer, not all "
        "zero) is multiplied by exp(0.5*randn) element-wise (correctness.perturb_buffers); the kernel generates the "
        "sinusoid instead of reading pe. Docs Known gaps name this risk ('a structural floating buffer ... a kernel that "
        "rebuilds it instead of reading it fails (an honest-kernel risk, none in the suites)'): here is one.",
    "honest/hn10_posenc_helper_param_loader.py":
        "REJECTED (dynamic_sources). specs._function_bindings excludes parameters ('its parameters ... are left out'), "
        "so `source=src` inside _build resolves to nothing: _Unresolved(\"name 'src' is not a module-level literal\").",
    "honest/hn11_smooth_max_c.py": "PASS (+1/+2).",
    "honest/hn12_smooth_max_padded_view.py":
        "REJECTED (output_layout). worker.layout_problem passes (no stride 0, no overlap); shm.strided_runs: span "
        "2047*16+1 elements = 131 KB > max(SPAN_FACTOR*8 KB, SPAN_MIN 64 KB) -> BadOutputLayout -> output_layout.",
    "honest/hn13_smooth_max_scratch_buffer.py":
        "REJECTED (state_dict_mismatch). worker.Server.load: self.model.load_state_dict(sd) is strict; sd (the reference's) "
        "has no 'row_max' -> RuntimeError('Missing key(s) ...') -> StateDictError.",
    "honest/hn14_row_normalize_augassign_source.py":
        "REJECTED (load_error). specs._module_bindings keeps only ast.Assign/AnnAssign: SRC resolves to the prologue; "
        "the parent builds that (it compiles: no export); in the worker runtime.load_c computes the key of the full "
        "source and runtime._lookup raises 'kernel sources ... differ from those extracted before the run' at import. (If the build refuses a lean artefact with no export, compile_error instead: rejected either way.)",
    "honest/hn15_vp_mix_tensoriterator.py":
        "REJECTED (forbidden_symbol). symbols._TORCH_OK: 'at::(?:TensorIteratorBase::|TensorIterator::)(?!.*(?:binary|"
        "unary|reduce|for_each|cast))' refuses at::TensorIteratorBase::for_each(c10::function_ref<...>, long), and "
        "at::TensorIteratorConfig::build() / add_output etc. (out of line) match no allowed class.",
    "honest/hn16_transpose_split_flags.py":
        "REJECTED (dynamic_sources). specs._STR_METHODS = strip/lstrip/rstrip/replace/format/join/upper/lower: "
        "'.split()' -> _Unresolved('a call to split() is not a string function of literals').",
    "honest/hn17_one_hot_c.py": "PASS (+2/+3): memset + 1024 stores vs eager's int64 one_hot (64 MB) + cast.",
    "honest/hn18_se_gate_materialized.py":
        "REJECTED (harness_error) after passing every correctness round. In profile(), the eager party's worker runs "
        "the Model, whose output is g[..., None, None].expand_as(x): worker.Server.round's fast path needs a contiguous "
        "tensor, _output calls layout_problem -> 'output dim 2 has stride 0' -> the reply is ok=False; "
        "evaluate._Evaluation.run: 'if not h.get(\"ok\"): raise RuntimeError(f\"the {w.setup_mode} baseline failed on "
        "{where}...\")' -> the exception boundary -> harness_error, reward -1. Any solution to p8 meets it when profiled; "
        "with profile=False it would pass (+1).",
}
