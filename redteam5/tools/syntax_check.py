"""Checks every source of the suite without running anything of the harness: ``py_compile`` on every .py file,
and ``g++/gcc -fsyntax-only`` on every C/C++ source a solution would build (load_c sources as lean C/C++, load_inline
sources with torch's headers and the pybind glue the harness appends, workspace kernels). Run from anywhere:

    /work/main/.venv/bin/python redteam5/tools/syntax_check.py
"""
from __future__ import annotations

import ast
import os
import py_compile
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEEP = ("-std=", "-D", "-U", "-m", "-f")


def _flags(fl):
    return [f for f in (fl or []) if isinstance(f, str) and f.startswith(KEEP) and not f.startswith("-fopenmp-simd")]


def _bindings(tree):
    env = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            env[node.targets[0].id] = node.value
    return env


def _lit(node, env):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _lit(env[node.id], env)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_lit(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_lit(k, env): _lit(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _lit(node.left, env) + _lit(node.right, env)
    raise ValueError(f"not a literal: {ast.dump(node)[:80]}")


def specs(path: Path):
    tree = ast.parse(path.read_text())
    env = _bindings(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name not in ("load_c", "load_inline"):
            continue
        pos = ["name", "source", "extra_cflags", "extra_ldflags"] if name == "load_c" else \
            ["name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags"]
        kw = {pos[i]: _lit(a, env) for i, a in enumerate(node.args)}
        for k in node.keywords:
            kw[k.arg] = _lit(k.value, env)
        out.append((name, kw))
    return out


_TORCH_INC = None


def torch_includes():
    global _TORCH_INC
    if _TORCH_INC is None:
        import torch.utils.cpp_extension as ce

        _TORCH_INC = []
        for d in ce.include_paths() + [sysconfig.get_path("include", scheme="posix_prefix")]:
            _TORCH_INC += ["-isystem", d]
    return _TORCH_INC


def run(cmd, what):
    r = subprocess.run(["nice", "-n", "10"] + cmd, capture_output=True, text=True)
    ok = r.returncode == 0
    print(("ok  " if ok else "FAIL") + f"  {what}")
    if not ok:
        print(r.stderr[-3000:])
    return ok


def check_lean(units: dict, flags, what, tmp: Path) -> bool:
    ok = True
    d = tmp / what.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    for rel, text in units.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel in units:
        p = d / rel
        if p.suffix == ".c":
            cmd = ["gcc", "-fsyntax-only", "-std=gnu11", "-march=native", "-fopenmp"] + \
                [f for f in _flags(flags) if not f.startswith("-std=c++") and not f.startswith("-std=gnu++")] + [str(p)]
        elif p.suffix in (".cpp", ".cc", ".cxx"):
            cmd = ["g++", "-fsyntax-only", "-std=c++17", "-march=native", "-fopenmp", f"-I{p.parent}", f"-I{d}"] + \
                [f for f in _flags(flags) if not (f.startswith("-std=c") and "++" not in f) and f != "-std=gnu11"] + [str(p)]
        else:
            continue
        ok &= run(cmd, f"{what}:{rel}")
    return ok


def check_torch(kw, what, tmp: Path) -> bool:
    src = kw.get("cpp_sources")
    src = "\n".join(src) if isinstance(src, list) else src
    fns = kw.get("functions") or []
    text = '#include <torch/extension.h>\n' + src
    if fns:
        text += "\nPYBIND11_MODULE(sk_ext, m) {\n" + "".join(
            f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");\n' for f in fns) + "}\n"
    p = tmp / (what.replace("/", "_") + ".cpp")
    p.write_text(text)
    cmd = ["g++", "-fsyntax-only", "-std=c++20", "-march=native", "-fopenmp", "-DTORCH_EXTENSION_NAME=sk_ext",
           "-DTORCH_API_INCLUDE_EXTENSION_H"] + torch_includes() + _flags(kw.get("extra_cflags")) + [str(p)]
    return run(cmd, what)


def main() -> int:
    bad = 0
    pys = sorted(p for sub in ("problems", "hacks", "honest", "tools") for p in (ROOT / sub).rglob("*.py"))
    pys.append(ROOT / "manifest.py")
    for p in pys:
        if not p.exists():
            continue
        try:
            with tempfile.TemporaryDirectory(prefix="rt5_pyc_") as d:
                py_compile.compile(str(p), doraise=True, cfile=os.path.join(d, "x.pyc"))
        except py_compile.PyCompileError as e:
            print(f"FAIL  py_compile {p}: {e}")
            bad += 1
    print(f"py_compile: {len(pys)} files, {bad} failures")
    with tempfile.TemporaryDirectory(prefix="rt5_syntax_") as t:
        tmp = Path(t)
        for sub in ("hacks", "honest"):
            for p in sorted((ROOT / sub).iterdir()):
                rel = f"{sub}/{p.name}"
                if p.is_dir():  # a workspace
                    units = {str(f.relative_to(p)): f.read_text() for f in p.rglob("*")
                             if f.is_file() and f.suffix in (".c", ".cpp", ".cc", ".cxx", ".h", ".hpp")}
                    if units and not check_lean(units, [], rel, tmp):
                        bad += 1
                    for f in p.rglob("*.py"):
                        for kind, kw in specs(f):
                            print(f"note: {rel}/{f.name} calls {kind}")
                    continue
                if p.suffix != ".py":
                    continue
                for kind, kw in specs(p):
                    if kind == "load_c":
                        units = kw.get("sources") or {"source.cpp": kw.get("source", "")}
                        ok = check_lean(units, kw.get("extra_cflags"), f"{rel}[{kw.get('name')}]", tmp)
                    else:
                        ok = check_torch(kw, f"{rel}[{kw.get('name')}]", tmp)
                    bad += 0 if ok else 1
    print("ALL OK" if not bad else f"{bad} FAILURES")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
