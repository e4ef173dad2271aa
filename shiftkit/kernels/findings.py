"""Findings: what a check found, with a stable code, a severity and a message.

Severity ``error`` makes a result incorrect (reward -1); ``warning`` is shown but does not change the
reward; ``review`` marks results a human should look at (e.g. an implausible speedup).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Every finding code, with a one-line meaning. docs/kernels.md renders this table.
CODES: dict[str, str] = {
    # the solution's files (parsed in the analysis subprocess)
    "syntax_error": "the solution's Python source does not parse",
    "dynamic_sources": "inline kernel sources are not static literals, so they cannot be built before the run",
    "analysis_failed": "the solution could not be analysed within the analyser's time and memory limits",
    "build_flag": "a compiler/linker flag outside the allowlist",
    # build
    "compile_error": "the kernel sources did not compile or link",
    "forbidden_symbol": "the built extension imports a symbol outside the allowlist (torch compute below the dispatcher, vendor BLAS/LAPACK, dynamic loading, the Python C API, ...)",
    # a run (the parent's view)
    "torch_compute": "torch's libraries accounted for too much of the candidate's sampled on-CPU time (a fallback)",
    "interpreter_compute": "the interpreter's own code (its builtins: bignums, bytes, struct) accounted for too much of the candidate's sampled on-CPU time, beyond twice the eager party's per round",
    "foreign_compute": "other libraries or unmapped/JIT code accounted for too much of the candidate's sampled on-CPU time",
    "sampling_evaded": "the parent's sampling saw far fewer samples than the worker tree's CPU time implies",
    "too_many_mappings": "the worker holds more executable mappings than the parent attributes samples over",
    "tampered_mapping": "an executable mapping naming the candidate's file or a runtime library is not a clean mapping of its executable segments",
    "blocked_torch_op": "the worker's op blocker named a torch compute op inside ModelNew.forward (correctness rounds)",
    "output_mismatch": "an output differs from the reference beyond the scale-aware tolerance",
    "output_type": "output type/shape/dtype/structure differs from the reference (incl. tensor subclasses)",
    "output_layout": "an output is an expand() view, has overlapping elements or spans far more memory than its elements: not a materialised result",
    "nondeterministic": "a repeat of the first round's inputs gave a different output",
    "shape_variant_mismatch": "wrong output on a declared shape variant (shape hard-coding)",
    "timed_output_mismatch": "an output produced during timing differs from the reference",
    "below_physical_floor": "time below the memory-bandwidth floor for the bytes the call must move",
    "worker_crash": "the worker died (segfault, abort, killed), e.g. on writing its read-only inputs",
    "timeout": "the evaluation's wall-clock budget ran out",
    "out_of_memory": "the candidate exceeded its memory limit",
    "output_limit": "the candidate wrote more output than allowed",
    "output_unwritten": "output memory the worker did not write (untouched or zero-page): the parent would have zero-filled it",
    "runtime_error": "ModelNew construction or forward raised",
    "load_error": "the solution module or its built extension could not be loaded",
    "state_dict_mismatch": "ModelNew does not accept the reference weights via load_state_dict (a reference tensor has no place, or a shape differs)",
    "protocol_violation": "the worker sent a malformed, oversized, unrequested or wrongly-nonced frame",
    "harness_error": "the harness itself failed on this solution (a bug to report); the result fails closed",
    "untrusted_result": "the evaluation ran without the sandbox (allow_unisolated=true): not a trusted reward",
    # problem admission and profiling
    "degenerate_problem": "the reference output is all-zero, constant or input-independent",
    "reference_error": "the problem's reference (its construction, get_inputs or forward) raised on its own inputs: the problem is broken, not the solution",
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
