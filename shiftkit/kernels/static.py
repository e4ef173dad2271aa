"""The few static checks that remain: pure functions, run inside the analysis subprocess.

Everything a pattern used to guess is now decided by the architecture (the sandbox, the parent-owned clock
and data path, the linked-symbol allowlist, the parent's instruction-pointer sampling, the comparison
against the reference). What stays is what no run can show: candidate build flags are interpreted by the
harness's compiler command line, so each must match an allowlist whole (no plugins, linker or assembler
pass-through, include paths, response files, specs or shell metacharacters).
"""

from __future__ import annotations

import re

from shiftkit.kernels.findings import Finding

_CFLAG_OK = re.compile(r"-O[0-3s]?|-Ofast|-ffast-math|-funsafe-math-optimizations|-fno-math-errno|-ffp-contract=(?:off|on|fast)"
                       r"|-march=native|-mtune=native|-m(?:avx|avx2|avx512(?:f|cd|bw|dq|vl|vnni)|fma|f16c|sse[234]?(?:\.[12])?|ssse3|bmi2?|popcnt|lzcnt)"
                       r"|-fopenmp|-fopenmp-simd|-pthread|-funroll-loops|-fno-unroll-loops|-ftree-vectorize|-fno-tree-vectorize|-fstrict-aliasing"
                       r"|-fomit-frame-pointer|-fno-exceptions|-fno-rtti|-fPIC|-std=(?:c|gnu)\+\+(?:98|03|11|14|17|20|23|26|0x|1y|1z|2a|2b|2c)"
                       r"|-std=(?:c|gnu)(?:89|90|99|9x|11|1x|17|18|2x|23)|-std=iso9899:(?:1990|1999|2011|2017|2018)"
                       r"|-D[A-Za-z_]\w{0,63}(?:=[A-Za-z0-9_.+-]{0,64})?|-U[A-Za-z_]\w{0,63}|-w|-g|-g[0-3]")
# Warning options (``-W[no-][error=]name[=value]``) only change the diagnostics. The name has no comma, so the
# linker, assembler and preprocessor pass-through (``-Wl,``, ``-Wa,``, ``-Wp,``) never matches; a name GCC does not
# know fails the build, nothing else. ``-Werror`` only turns the candidate's own warnings into build errors.
_WARNING = re.compile(r"-W(?:no-)?(?:error=)?[a-z][a-z0-9+-]{1,63}(?:=[A-Za-z0-9_.+-]{1,32})?")
_CUDAFLAG_OK = re.compile(r"-O[0-3]|-arch=sm_\d{2,3}a?|-gencode=arch=compute_\d{2,3}a?,code=sm_\d{2,3}a?|--expt-relaxed-constexpr"
                          r"|--expt-extended-lambda|-lineinfo|-std=c\+\+(?:14|17|20)|-D[A-Za-z_]\w{0,63}(?:=[A-Za-z0-9_.]{0,64})?"
                          r"|--use_fast_math|-Xptxas=-v|--ptxas-options=-v")
_LDFLAG_OK = re.compile(r"-fopenmp|-pthread|-lpthread|-lm|-lgomp|-O[0-3]")


# GCC's code-generation and optimisation options (``-f[no-]name[=value]``, ``-m[no-]name[=value]``) only change
# the code the compiler emits; what it emits is judged by the symbol allowlist, the sampling and the comparison.
# Refused by their class, not their spelling: options that name a file, directory, program or plugin, add an
# instrumentation or sanitiser runtime, send output elsewhere, or stop the compiler before an artefact exists.
_CODEGEN = re.compile(r"-([fm])(no-)?([a-z0-9][a-z0-9+.-]{0,63})(?:=([A-Za-z0-9_.,+-]{1,64}))?")
_NOT_CODEGEN = re.compile(
    r"plugin|dump|profile|auto-profile|\w*prefix-map|opt-info|callgraph-info|save-optimization-record|record-gcc-switches"
    r"|sanitize|coverage|test-coverage|branch-probabilities|instrument|patchable-function-entry|syntax-only|lto|use-ld"
    r"|ld-path|use-linker-plugin|stack-usage|working-directory|diagnostics|self-test|dbg-cnt|debug-prefix|compare-debug"
    r"|ipa-profile|create-profile|asm|preprocessed|directives-only|stack-check|split-stack|fixed-|call-used-|call-saved-"
    r"|exec-charset|input-charset|wide-exec-charset|dollars|abi|pie|PIE|hardened"
    r"|cmodel|32|x32|16|multilib|sysroot|indirect-branch|function-return|regparm|fentry"
    r"|nop-mcount|record-mcount|mcount|stack-protector-guard")


def codegen_flag(f: str) -> bool:
    """Pure: a -f/-m option that changes only the emitted code (see above)."""
    m = _CODEGEN.fullmatch(f)
    return bool(m) and not _NOT_CODEGEN.match(m.group(3))


# Code-generation options the harness cannot honour, each with why (the error names it).
REFUSED = {"-ffinite-math-only": "inf and NaN keep their IEEE meaning in every build (the comparison feeds inputs on "
                                 "which the reference overflows to inf); -ffast-math is honoured without this part"}


def disallowed_flags(cflags: list[str], cuda_cflags: list[str] = (), ldflags: list[str] = ()) -> list[str]:
    """Pure: candidate flags not on the allowlist (each must match whole)."""
    bad = [f for f in cflags if not isinstance(f, str) or f in REFUSED
           or not (_CFLAG_OK.fullmatch(f) or codegen_flag(f) or _WARNING.fullmatch(f))]
    bad += [f for f in cuda_cflags if not isinstance(f, str) or not _CUDAFLAG_OK.fullmatch(f)]
    # a link line takes the link flags and every compile flag (the driver passes -march/-O/-f/-m through to
    # code generation at link time; redteam6 hn03 shared one flag list): the same classes, the same refusals
    bad += [f for f in ldflags if not isinstance(f, str) or f in REFUSED
            or not (_LDFLAG_OK.fullmatch(f) or _CFLAG_OK.fullmatch(f) or codegen_flag(f) or _WARNING.fullmatch(f))]
    return [str(b)[:100] for b in bad]


def check_flags(flags: list[str], cuda_flags: list[str] = (), ldflags: list[str] = ()) -> list[Finding]:
    return [Finding("build_flag", flag_message(b), "error", "flags") for b in disallowed_flags(flags, cuda_flags, ldflags)]


def flag_message(flag: str) -> str:
    """Pure: the one-line reason a build flag is refused."""
    why = REFUSED.get(flag)
    return f"build flag {flag!r} is refused: {why}" if why else f"build flag {flag!r} is not on the allowlist"
