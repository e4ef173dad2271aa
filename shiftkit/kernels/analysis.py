"""Every parse of candidate-controlled bytes that the parent needs, in a time- and memory-limited subprocess.

``analyze_solution`` parses the solution's Python files with Python's own parser (``ast``), extracts the
kernel sources (static literals of ``load_inline``/``load_c`` calls) and runs the few static checks that
remain (syntax, non-literal sources, build flags). ``analyze_artefact`` reads a built extension's ELF
dynamic table and DWARF prototypes (:mod:`symbols`). A deeply nested expression, a parser bomb or a crafted
ELF file can at worst kill this subprocess: the parent turns that into a finding and carries on.

Run as ``python -I analysis.py`` with a JSON request on stdin; the answer is one JSON object on stdout.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

MEM_BYTES = 2 << 30
CPU_S = 60
MAX_REPLY = 16 << 20


class AnalysisFailed(Exception):
    """The subprocess died, ran out of time or answered nonsense."""


def analyze_solution(files: dict[str, str], main: str, backend: str) -> dict:
    """Pure (in the subprocess): specs + findings for the solution's Python files."""
    import dataclasses

    from shiftkit.kernels import static
    from shiftkit.kernels.specs import extract_specs

    specs, findings = [], []
    for rel in sorted(files, key=lambda r: (r != main, r)):
        s, f = extract_specs(files[rel], backend)
        specs += s
        where = "" if rel == main else rel
        findings += [dataclasses.replace(x, where=f"{where} {x.where or ''}".strip()) for x in f]
        for spec in s:
            findings += static.check_flags(spec.extra_cflags, spec.extra_cuda_cflags, spec.extra_ldflags)
    return {"specs": [dataclasses.asdict(s) for s in specs], "findings": [f.to_dict() for f in findings]}


def analyze_artefact(path: str) -> dict:
    from shiftkit.kernels import symbols

    info = symbols.elf_info(path)
    info["demangled"] = symbols.demangle(info["undefined"])
    return info


RUNTIME_LIBS = ("libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1")


def runtime_exports() -> dict:
    """Every name the system's language runtimes export: libm (C99 real and complex math, the floating-point
    environment), libstdc++ (the C++ library and ABI runtime), libgcc_s (unwinding, arithmetic helpers),
    libgomp (OpenMP). None of them can reach the harness, the dispatcher or another process. libc, which can
    (dlopen, syscall, fork), is read by ``build.runtime_imports`` and allowed less its deny class
    (``symbols._LIBC_DENY``)."""
    import ctypes

    from shiftkit.kernels import symbols

    loaded = []
    for lib in RUNTIME_LIBS:
        try:
            ctypes.CDLL(lib)
            loaded.append(lib)
        except OSError:  # not installed here: its names are simply not allowed
            pass
    stems = tuple("/" + lib.split(".so")[0] + s for lib in loaded for s in (".so", "-"))
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if any(t in ln for t in stems)})
    return {"paths": paths, "exports": sorted({n for p in paths for n in symbols.exports(p)})}


def _main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_BYTES, MEM_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 1))
    sys.setrecursionlimit(3000)
    req = json.loads(sys.stdin.read())
    try:
        if req["op"] == "solution":
            out = analyze_solution(req["files"], req["main"], req["backend"])
        elif req["op"] == "artefact":
            out = analyze_artefact(req["path"])
        elif req["op"] == "runtime":
            out = runtime_exports()
        else:
            out = {"error": f"unknown op {req['op']!r}"}
    except (RecursionError, MemoryError) as e:
        out = {"error": f"{type(e).__name__}: the input exceeds the analyser's limits"}
    except Exception as e:  # noqa: BLE001 - reported, the parent decides
        out = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()


def run(req: dict, timeout_s: float = 90.0) -> dict:
    """Parent side: run one request in a fresh limited subprocess; AnalysisFailed on any failure."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    code = f"import sys; sys.path.insert(0, {root!r}); from shiftkit.kernels import analysis; analysis._main()"
    try:
        r = subprocess.run([sys.executable, "-I", "-c", code], input=json.dumps(req).encode(), capture_output=True,
                           timeout=timeout_s, close_fds=True, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    except subprocess.TimeoutExpired:
        raise AnalysisFailed(f"the analyser ran past {timeout_s:.0f} s") from None
    if r.returncode != 0:
        raise AnalysisFailed(f"the analyser died (exit status {r.returncode})")
    if len(r.stdout) > MAX_REPLY:
        raise AnalysisFailed("the analyser's answer is too large")
    try:
        out = json.loads(r.stdout)
    except (ValueError, RecursionError):
        raise AnalysisFailed("the analyser's answer is not JSON") from None
    if not isinstance(out, dict):
        raise AnalysisFailed("the analyser's answer is not an object")
    if "error" in out:
        raise AnalysisFailed(str(out["error"])[:400])
    return out
