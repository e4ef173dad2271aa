"""Import KernelBench problem files into our problem set, optionally scaled for this CPU.

``--scale cpu`` rewrites the module-level size constants (ints >= 16, and tuples of them) by one common
factor (steps of 1/sqrt(2); one factor for all, so equal sizes stay equal and broadcasting survives) until the reference forward
takes ``min_ms``..``max_ms`` on this CPU (1 thread, median of 3), never growing beyond the original.
Input sizes are first checked on the meta device so a 9 GB original is never allocated. The original
values are recorded as ``ORIGINAL_SIZES`` and the degenerate-task guard decides admission.
"""

from __future__ import annotations

import ast
import re
import time
from dataclasses import dataclass
from pathlib import Path

from shiftkit.errors import ShiftkitError


@dataclass
class ImportRecord:
    source: str
    out: str | None
    admitted: bool
    reason: str
    original_sizes: dict
    scaled_sizes: dict
    ref_ms: float | None


def size_constants(src: str) -> dict[str, tuple[int, int, object]]:
    """Pure: module-level ``NAME = <int >= 16 | tuple of ints | int expr>`` -> {name: (lineno, end_lineno, value)}."""
    tree = ast.parse(src)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                v = ast.literal_eval(node.value) if not isinstance(node.value, ast.BinOp) else eval(  # noqa: S307
                    compile(ast.Expression(node.value), "<size>", "eval"), {"__builtins__": {}})
            except Exception:  # noqa: BLE001
                continue
            if isinstance(v, bool):
                continue
            if isinstance(v, int) and v >= 16:
                out[node.targets[0].id] = (node.lineno, node.end_lineno, v)
            elif isinstance(v, tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v) and max(v) >= 16:
                out[node.targets[0].id] = (node.lineno, node.end_lineno, v)
    return out


def scale_value(v, factor: float):
    """Pure: scale an int (or each int >= 16 of a tuple) by ``factor``, at least 1."""
    if isinstance(v, tuple):
        return tuple(scale_value(x, factor) if x >= 16 else x for x in v)
    return max(1, int(round(v * factor)))


def rewrite(src: str, new_values: dict[str, object], header: str, footer: str) -> str:
    """Pure: replace the given module-level assignments, add a header comment and footer lines."""
    consts = size_constants(src)
    lines = src.splitlines()
    for name, (lo, hi, _) in sorted(consts.items(), key=lambda kv: -kv[1][0]):
        if name in new_values:
            lines[lo - 1:hi] = [f"{name} = {new_values[name]!r}"]
    return header + "\n".join(lines).rstrip() + "\n\n" + footer


def _load_src(src: str, tag: str):
    import types

    mod = types.ModuleType(f"_sk_kb_{tag}")
    exec(compile(src, f"<kernelbench {tag}>", "exec"), mod.__dict__)  # trusted: benchmark problem files
    return mod


def _input_bytes(mod) -> int:
    import torch

    with torch.device("meta"):
        ins = mod.get_inputs()
    return sum(x.numel() * x.element_size() for x in ins if isinstance(x, torch.Tensor))


def _ref_ms(mod, reps: int = 5) -> float:
    import torch

    torch.manual_seed(0)
    m = mod.Model(*mod.get_init_inputs()).eval()
    ins = mod.get_inputs()
    ts = []
    with torch.no_grad():
        m(*ins)  # warm-up
        for _ in range(reps):
            t = time.perf_counter()
            m(*ins)
            ts.append((time.perf_counter() - t) * 1e3)
    return sorted(ts)[len(ts) // 2]


def scale_for_cpu(src: str, min_ms: float = 1.0, max_ms: float = 100.0, max_input_mb: float = 256.0,
                  target_ms: float | None = None) -> tuple[str | None, dict, dict, float | None, str]:
    """Find a power-of-two factor <= 1 that puts the reference forward in [min_ms, max_ms]."""
    import torch

    consts = size_constants(src)
    orig = {k: v for k, (_, _, v) in consts.items()}
    if not orig:
        return None, orig, orig, None, "no size constants to scale"
    target_ms = target_ms or 2.5 * min_ms  # low in the window: cheap to verify, still well above timer noise
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        factor = 1.0
        for _ in range(40):  # shrink until the inputs fit the memory budget
            vals = {k: scale_value(v, factor) for k, v in orig.items()}
            mod = _load_src(rewrite(src, vals, "", ""), "probe")
            if _input_bytes(mod) <= max_input_mb * 2**20:
                break
            factor /= 2
        best = None
        for _ in range(40):
            vals = {k: scale_value(v, factor) for k, v in orig.items()}
            mod = _load_src(rewrite(src, vals, "", ""), "probe")
            ms = _ref_ms(mod)
            if ms > max_ms or ms > 2 * target_ms:
                factor /= 2 ** 0.5
                continue
            best = (vals, ms)
            if ms < min_ms and factor < 1.0:
                factor *= 2 ** 0.5
                vals2 = {k: scale_value(v, factor) for k, v in orig.items()}
                ms2 = _ref_ms(_load_src(rewrite(src, vals2, "", ""), "probe"))
                if ms2 <= max_ms:
                    best = (vals2, ms2)
            break
        if best is None:
            return None, orig, orig, None, "could not bring the reference into the time window"
        return rewrite(src, best[0], "", ""), orig, best[0], best[1], "ok"
    finally:
        torch.set_num_threads(prev)


def find_problem_files(root: str | Path, level: int) -> list[Path]:
    root = Path(root)
    for d in (root / "KernelBench" / f"level{level}", root / f"level{level}", root):
        if d.is_dir():
            files = sorted(p for p in d.glob("*.py") if re.match(r"^\d+_", p.name))
            if files:
                return sorted(files, key=lambda p: int(p.name.split("_")[0]))
    raise ShiftkitError(f"no KernelBench level-{level} problem files (N_Name.py) under {root}")


def import_kernelbench(root: str | Path, level: int, out_dir: str | Path, scale: str | None = None,
                       only: list[str] | None = None, keep_degenerate: bool = False,
                       min_ms: float = 1.0, max_ms: float = 100.0) -> list[ImportRecord]:
    from shiftkit.kernels.evaluate import EvalConfig, admit_problem
    from shiftkit.kernels.problem import load_problem

    if scale not in (None, "none", "cpu"):
        raise ShiftkitError(f"unknown --scale {scale!r}; valid: cpu, none")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recs = []
    for f in find_problem_files(root, level):
        if only and not any(o == f.stem or f.name.startswith(f"{o}_") for o in only):
            continue
        src = f.read_text()
        orig = {k: v for k, (_, _, v) in size_constants(src).items()}
        new_src, scaled, ms = src, orig, None
        if scale == "cpu":
            new_src, orig, scaled, ms, why = scale_for_cpu(src, min_ms, max_ms)
            if new_src is None:
                recs.append(ImportRecord(str(f), None, False, why, orig, orig, None))
                continue
        stem = re.sub(r"[^0-9A-Za-z_]", "_", f.stem).strip("_")
        dest = out / f"kb_l{level}_{stem}.py"
        header = (f'"""KernelBench level{level}/{f.name} (github.com/ScalingIntelligence/KernelBench, MIT license),\n'
                  f'imported by `shiftkit kernels import-kernelbench` with --scale {scale or "none"}."""\n')
        footer = (f"ORIGINAL_SIZES = {orig!r}\nKERNELBENCH_SOURCE = {f'level{level}/{f.name}'!r}\n"
                  + (f"SCALED_FOR = 'cpu'  # reference forward {ms:.1f} ms at 1 thread when imported\n" if ms else ""))
        text = rewrite(new_src, scaled, header, footer)
        dest.write_text(text)
        adm = admit_problem(load_problem(dest), EvalConfig())
        if adm and not keep_degenerate:
            dest.unlink()
            recs.append(ImportRecord(str(f), None, False, adm[0].message, orig, scaled, ms))
            continue
        recs.append(ImportRecord(str(f), str(dest), not adm, "ok" if not adm else adm[0].message, orig, scaled, ms))
    return recs
