"""Local development check for red-team fixtures (NOT the environment): builds a solution's lean C kernels with
plain g++ (no allowlist, no sandbox), runs ModelNew against the problem's Model on a few inputs and reports the
max error. Used to make sure honest kernels are genuinely correct and hacks do what they intend.

usage: python redteam/tools/localcheck.py PROBLEM SOLUTION [--bench]
"""
import ctypes
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import torch

torch.set_num_threads(1)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from shiftkit.kernels import runtime, symbols  # noqa: E402
from shiftkit.kernels.problem import load_problem  # noqa: E402

BUILD = os.path.join(tempfile.gettempdir(), "rt17_localbuild")
os.makedirs(BUILD, exist_ok=True)


def build_c(name, sources, extra_cflags=()):
    key = hashlib.sha256(repr((name, sorted(sources.items()), list(extra_cflags))).encode()).hexdigest()[:16]
    d = os.path.join(BUILD, key)
    so = os.path.join(d, "ext.so")
    if not os.path.exists(so):
        os.makedirs(d, exist_ok=True)
        units = []
        for rel, text in sources.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(text)
            if p.endswith((".cpp", ".cc", ".c")):
                units.append(p)
        cmd = ["g++", "-O3", "-fopenmp", "-march=native", "-std=c++17", "-fPIC", "-shared", "-g", f"-I{d}",
               *[f"-I{os.path.dirname(u)}" for u in units], *extra_cflags, *units, "-o", so]
        subprocess.run(cmd, check=True)
    protos = symbols.elf_info(so)["protos"]
    return runtime.CLib(so, protos)


def fake_load_c(name, source=None, sources=None, extra_cflags=None, extra_ldflags=None):
    return build_c(name, sources or {"source.cpp": source}, extra_cflags or [])


runtime.load_c = fake_load_c


def load_solution(path):
    if os.path.isdir(path):
        ks = {}
        for dp, _, fs in os.walk(path):
            for f in fs:
                if f.endswith((".cpp", ".cc", ".h", ".hpp")):
                    full = os.path.join(dp, f)
                    ks[os.path.relpath(full, path)] = open(full).read()
        if ks:
            sys.modules["kernel_ext"] = build_c("kernel_ext", ks)
        sys.path.insert(0, path)
        path = os.path.join(path, "model_new.py")
    spec = importlib.util.spec_from_file_location("model_new", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["model_new"] = mod
    spec.loader.exec_module(mod)
    return mod.ModelNew


def main():
    from shiftkit.kernels import correctness as C

    prob, sol = sys.argv[1], sys.argv[2]
    p = load_problem(prob)
    ref = p.make_model(42)
    cls = load_solution(sol)
    m = cls(*p.init_inputs())
    m.load_state_dict(ref.state_dict())
    m.eval()
    x0 = p.inputs(123)
    cases = [("own", x0), ("own2", p.inputs(7))]
    for i, t in enumerate(C.TRANSFORMS):
        cases.append((t, C.transform(x0, t, 99 + i)))
    for var in p.shape_variants:
        cases.append((f"variant {var}", p.inputs(5, var)))
    with torch.no_grad():
        for name, x in cases:
            e = ref(*x)
            a = m(*[v.clone() if isinstance(v, torch.Tensor) else v for v in x])
            code, msg, diff = C.compare(e, a, "default", reduced_precision=p.allow_reduced_precision)
            print(f"{name:>28}: {'OK ' if code is None else code} maxdiff={diff:.3g} {msg[:120]}")
    if "--bench" in sys.argv:
        with torch.no_grad():
            for label, f in (("eager", ref), ("solution", m)):
                f(*x0)
                ts = []
                for _ in range(20):
                    t = time.perf_counter()
                    f(*x0)
                    ts.append(time.perf_counter() - t)
                ts.sort()
                print(f"{label}: median {ts[len(ts) // 2] * 1e3:.3f} ms, min {ts[0] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
