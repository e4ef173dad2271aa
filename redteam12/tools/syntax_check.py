"""(redteam12 copy of the redteam10 tool; only this note and the temp-dir prefix changed. The torch include
lookup also tries the repository's .venv.) Syntax-check every kernel source of this suite without importing the
harness or running any solution.

Each .py under hacks/ and honest/ is parsed with `ast`; string sources assigned to a name (module level or inside a
function: SRC, CPP, src, _SRC) are evaluated from literals only (plain constants, f-strings over module constants,
textwrap.dedent of a literal) and written to a temp dir; `.c` sources (load_c sources={"x.c": ...}) go to
`gcc -fsyntax-only -std=c11`, the rest to `g++ -fsyntax-only -std=c++17` (torch include paths added when the source
includes <torch/extension.h>; the file's own -D flags passed). Prints one line per source and ALL OK at the end."""
import ast
import glob
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import textwrap

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = {"SRC", "CPP", "src", "_SRC"}


def torch_includes():
    for sp in glob.glob(os.path.join(HERE, "..", ".venv", "lib", "python3*", "site-packages")):
        inc = os.path.join(sp, "torch", "include")
        if os.path.isdir(inc):
            return ["-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
                    "-isystem", sysconfig.get_paths()["include"]]
    return []


def literal_env(tree):
    env = {"textwrap": textwrap}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant):
                env[node.targets[0].id] = node.value.value
    return env


def sources(path):
    text = open(path).read()
    tree = ast.parse(text)
    env = literal_env(tree)
    out = []
    is_c = '".c"' in text or '.c":' in text
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in NAMES:
            v = node.value
            ok = isinstance(v, (ast.Constant, ast.JoinedStr)) or (
                isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "dedent")
            if ok:
                s = eval(compile(ast.Expression(v), path, "eval"), dict(env))
                out.append((node.targets[0].id, s, is_c))
    for node in tree.body:  # a module-level `SRC += literal` extends the source
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in NAMES \
                and isinstance(node.value, ast.Constant):
            for k, (name, s, c) in enumerate(out):
                if name == node.target.id:
                    out[k] = (name, s + node.value.value, c)
    return out


def main():
    bad = 0
    n = 0
    tinc = None
    with tempfile.TemporaryDirectory(prefix="rt12_syntax_") as d:
        for path in sorted(glob.glob(os.path.join(HERE, "hacks", "*.py")) + glob.glob(os.path.join(HERE, "honest", "*.py"))):
            srcs = sources(path)
            if not srcs:
                print("--  " + os.path.relpath(path, HERE) + " (no kernel source)")
            for name, s, is_c in srcs:
                n += 1
                ext = ".c" if is_c else ".cpp"
                f = os.path.join(d, os.path.basename(path)[:-3] + "_" + name + ext)
                open(f, "w").write(s)
                if is_c:
                    cmd = ["gcc", "-fsyntax-only", "-std=c11", f]
                else:
                    cmd = ["g++", "-fsyntax-only", "-std=c++17", "-pthread", "-march=native", "-mavx2", "-mfma",
                           "-mf16c", "-fopenmp", f]
                    if "torch/extension.h" in s:
                        tinc = tinc if tinc is not None else torch_includes()
                        cmd[1:1] = tinc
                cmd[1:1] = re.findall(r'"(-D[A-Za-z_][^"]*)"', open(path).read())  # the file's own -D flags
                r = subprocess.run(cmd, capture_output=True, text=True)
                print(("OK  " if r.returncode == 0 else "BAD ") + os.path.relpath(path, HERE) + " " + name)
                if r.returncode:
                    bad += 1
                    print(r.stderr[:3000])
    print(f"{n} sources checked")
    print("ALL OK" if not bad else f"{bad} FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
