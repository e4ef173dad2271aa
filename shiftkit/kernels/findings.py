"""Findings: what a check found, with a stable code, a severity and a message.

Severity ``error`` makes a result incorrect (reward -1); ``warning`` is shown but does not change the
reward; ``review`` marks results a human should look at (e.g. an implausible speedup).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Every finding code, with a one-line meaning. docs/kernels.md renders this table.
CODES: dict[str, str] = {
    # static checks (solution source)
    "fallback_try_except": "try/except (or bare pass in a handler) around kernel code: a silent fallback path",
    "inherits_reference": "ModelNew subclasses the reference Model",
    "imports_reference": "the solution imports the problem/reference module",
    "threads_or_processes": "threading, multiprocessing, subprocess, fork or std::thread in the solution",
    "monkey_patch": "assignment to attributes of torch, time, builtins, the harness or other modules",
    "introspection": "inspect, gc, sys._getframe, frame attributes, sys.modules or ctypes access",
    "file_or_network_access": "open(), os/pathlib/shutil file operations, sockets or HTTP",
    "precision_lowering": "half/bfloat16/TF32/fast-math intrinsics where the problem does not allow them",
    "foreign_compute": "numpy/scipy/numba/jax compute that bypasses both kernels and the op blocker",
    "torch_compute_in_python": "torch compute call in Python source (runtime blocking decides)",
    "torch_op_in_kernel": "torch/ATen compute call inside C++/CUDA source (runtime blocking decides)",
    "library_substitution": "torch.compile/TorchScript/torch.library/private torch internals or another library in the kernel's place",
    "vendor_library": "BLAS/LAPACK/MKL/oneDNN/cuBLAS called from the kernel (source or linked symbols): a fallback",
    "build_flag": "a compiler/linker flag outside the allowlist",
    "timing_interference": "CUDA graphs, events or persisting-L2 windows in kernel source (they change what the clock measures)",
    "dynamic_sources": "inline kernel sources are not static literals, so they cannot be built safely",
    "syntax_error": "the solution's Python source does not parse",
    # build
    "compile_error": "the kernel sources did not compile or link",
    # runtime (worker + trusted parent)
    "harness_tampering": "candidate code left a dispatch/function mode, global hook or trace function armed, or removed the op blocker",
    "protocol_violation": "the worker sent a malformed, oversized, unrequested or wrongly-nonced frame",
    "lazy_output": "an output (or input) changed after the timed call replied: work moved out of the timed window",
    "output_layout": "output has a stride-0 or overlapping layout (an expand() view instead of a materialised result)",
    "untimed_work": "the candidate's worker used far more CPU outside the timed calls than the baseline's (review)",
    "below_physical_floor": "time below the memory-bandwidth floor for the bytes the call must move",
    "decoy_kernel": "no built kernel was called during a forward",
    "untrusted_result": "the evaluation ran without the sandbox (allow_unisolated=true): not a trusted reward",
    "blocked_torch_op": "a torch compute op ran inside ModelNew.forward",
    "output_mismatch": "output differs from the reference beyond tolerance",
    "output_type": "output type/shape/dtype/device differs from the reference (incl. tensor subclasses)",
    "input_mutated": "ModelNew.forward modified its inputs",
    "nondeterministic": "two runs on identical inputs gave different outputs",
    "shape_variant_mismatch": "wrong output on a declared shape variant (shape hard-coding)",
    "timed_output_mismatch": "an output produced during timing differs from the reference (caching, batch-and-skip)",
    "reused_output": "forward returned storage it had already returned for earlier inputs",
    "degenerate_output": "output is all-zero/constant/input-independent while the reference is not",
    "thread_spawned": "the worker gained threads while running the candidate",
    "worker_crash": "the worker died (segfault, abort, killed)",
    "timeout": "the evaluation exceeded its wall-time limit",
    "out_of_memory": "the candidate exceeded its memory limit",
    "output_limit": "the candidate wrote more output than allowed",
    "runtime_error": "ModelNew construction or forward raised",
    "load_error": "the solution module or its built extension could not be loaded",
    "state_dict_mismatch": "ModelNew does not accept the reference weights via load_state_dict",
    # problem admission and profiling
    "degenerate_problem": "the reference output is all-zero, constant or input-independent",
    "implausible_speedup": "speedup above the review bound (default 10x)",
}


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    severity: str = "error"  # error | warning | review
    where: str | None = None

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}; valid: {', '.join(sorted(CODES))}")
        if self.severity not in ("error", "warning", "review"):
            raise ValueError(f"unknown severity {self.severity!r}; valid: error, warning, review")

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "Finding":
        return Finding(d["code"], d["message"], d.get("severity", "error"), d.get("where"))


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]
