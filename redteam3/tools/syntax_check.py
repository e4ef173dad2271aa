"""Syntax-check every C/C++ source of the suite WITHOUT running the harness: extract the static sources of
load_c / load_inline calls (module-level string literals, as the harness's analysis does) and workspace files,
then run the compiler with -fsyntax-only. Skips hacks/h20 (its #include "/dev/zero" would eat gigabytes).
Usage: .venv/bin/python redteam3/tools/syntax_check.py [paths...]"""
import ast
import os
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {"hacks/h20_compile_dev_zero.py"}
BASE_CXX = ["-std=c++17", "-O3", "-fopenmp", "-march=native", "-fPIC"]


def torch_flags():
    import torch.utils.cpp_extension as ce

    out = ["-DTORCH_EXTENSION_NAME=sk_ext", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for d in ce.include_paths() + [sysconfig.get_path("include", scheme="posix_prefix")]:
        out += ["-isystem", d]
    return out


def literal(node, env):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return literal(env[node.id], env)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {literal(k, env): literal(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp):
        return literal(node.left, env) + literal(node.right, env)
    raise ValueError(type(node).__name__)


def calls(path):
    tree = ast.parse(open(path).read())
    env = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
           and isinstance(n.targets[0], ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("load_c", "load_inline"):
                kw = {k.arg: literal(k.value, env) for k in node.keywords if k.arg}
                yield name, kw


def run(cmd):
    r = subprocess.run(["nice", "-n", "10"] + cmd, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr)[-3000:]


def check_file(rel):
    path = os.path.join(ROOT, rel)
    results = []
    with tempfile.TemporaryDirectory() as td:
        for name, kw in calls(path):
            flags = list(kw.get("extra_cflags") or [])
            if name == "load_c":
                srcs = kw.get("sources") or {"source.cpp": kw["source"]}
                for fn, text in srcs.items():
                    p = os.path.join(td, fn)
                    open(p, "w").write(text)
                    if fn.endswith(".c"):
                        cmd = ["gcc", "-fsyntax-only", "-std=gnu11", "-O3", "-fopenmp", "-march=native"] + \
                              [f for f in flags if not f.startswith("-std=c++")] + [p]
                    else:
                        cmd = ["g++", "-fsyntax-only"] + BASE_CXX + flags + [p]
                    results.append((f"{rel}:{fn}", *run(cmd)))
            else:
                cpp = kw["cpp_sources"]
                cpp = "\n".join(cpp) if isinstance(cpp, list) else cpp
                text = '#include <torch/extension.h>\n' + cpp
                fns = kw.get("functions") or []
                if fns:
                    defs = "\n".join(f'  m.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in fns)
                    text += f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n"
                p = os.path.join(td, "cpp_sources.cpp")
                open(p, "w").write(text)
                results.append((f"{rel}:cpp_sources", *run(["g++", "-fsyntax-only"] + BASE_CXX + torch_flags() + flags + [p])))
    return results


def check_workspace(rel):
    d = os.path.join(ROOT, rel)
    files = [os.path.join(dp, f) for dp, _, fs in os.walk(d) for f in fs if f.endswith((".c", ".cpp"))]
    uses_torch = any("torch/" in open(f).read() or "PYBIND11_MODULE" in open(f).read() for f in files)
    incs = ["-I" + d] + sorted({"-I" + os.path.dirname(f) for f in files})
    out = []
    for f in files:
        if f.endswith(".c"):
            cmd = ["gcc", "-fsyntax-only", "-std=gnu11", "-O3", "-march=native"] + incs + \
                  (torch_flags() if uses_torch else []) + [f]
        else:
            cmd = ["g++", "-fsyntax-only"] + BASE_CXX + incs + (torch_flags() if uses_torch else []) + [f]
        out.append((os.path.relpath(f, ROOT), *run(cmd)))
    return out


def main(argv):
    targets = argv or sorted(
        [os.path.join(k, f) for k in ("honest", "hacks") for f in os.listdir(os.path.join(ROOT, k))])
    bad = 0
    for rel in targets:
        if rel in SKIP:
            print(f"SKIP {rel}")
            continue
        res = check_workspace(rel) if os.path.isdir(os.path.join(ROOT, rel)) else check_file(rel)
        for what, rc, log in res:
            print(("OK  " if rc == 0 else "FAIL") + f" {what}")
            if rc:
                bad += 1
                print(log)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
