"""What solutions call at import time to get their kernels.

- :func:`load_c` loads a lean C ABI library: every ``extern "C"`` function in the sources becomes a
  Python callable taking tensors (passed as data pointers), ints (int64/int) and floats; argument types
  come from the C prototypes. Tensors must be contiguous (checked).
- Inside an evaluation worker, :func:`install_prebuilt` makes ``load_c`` and
  ``torch.utils.cpp_extension.load_inline`` return the artefacts the trusted parent already built; a
  call whose sources differ from the statically extracted ones fails.
- Outside the harness (a user experimenting), ``load_c`` builds on the fly through :mod:`build`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import sys
from typing import Any

from shiftkit.kernels.solution import BuildSpec, spec_from_load_c, spec_from_load_inline

_PREBUILT: dict[str, dict] = {}  # spec key (no salt) -> build result dict
_LOADED: dict[str, Any] = {}  # so path -> loaded module (each artefact is verified and loaded once)
KERNEL_CALLS = [0]  # calls into built kernels since the worker last reset it (decoy-kernel check)
_PROTO_RE = re.compile(r'extern\s+"C"\s+(?:__attribute__\s*\(\(.*?\)\)\s*)?([\w\s\*]+?)\s*\b(\w+)\s*\(([^)]*)\)\s*\{', re.S)
_INT64 = {"int64_t", "long", "long long", "size_t", "ssize_t", "ptrdiff_t", "long int", "unsigned long", "uint64_t", "long long int"}
_INT32 = {"int", "int32_t", "unsigned", "unsigned int", "uint32_t", "bool"}


def parse_prototypes(src: str) -> dict[str, list[str]]:
    """Pure: ``extern "C" T name(args) {`` -> {name: [ctype kind per arg]} with kinds ptr/i64/i32/f32/f64."""
    from shiftkit.kernels.static import strip_c_comments

    out: dict[str, list[str]] = {}
    for m in _PROTO_RE.finditer(strip_c_comments(src)):
        name, args = m.group(2), m.group(3).strip()
        kinds = []
        if args and args != "void":
            for a in args.split(","):
                a = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", a).strip()
                if "*" in a:
                    kinds.append("ptr")
                    continue
                t = " ".join(a.split()[:-1]) if len(a.split()) > 1 else a
                t = " ".join(t.split())
                if t in _INT64:
                    kinds.append("i64")
                elif t in _INT32:
                    kinds.append("i32")
                elif t == "float":
                    kinds.append("f32")
                elif t == "double":
                    kinds.append("f64")
                else:
                    raise TypeError(f"extern \"C\" {name}: unsupported argument type {t!r} (use pointers, int64_t, int, float, double)")
        out[name] = kinds
    return out


_CT = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "i32": ctypes.c_int, "f32": ctypes.c_float, "f64": ctypes.c_double}


class CLib:
    """Callable ``extern "C"`` functions of a lean kernel library."""

    def __init__(self, so_path: str, protos: dict[str, list[str]]):
        self._lib = ctypes.CDLL(so_path)
        self._fns = {}
        for name, kinds in protos.items():
            fn = getattr(self._lib, name)
            fn.argtypes = [_CT[k] for k in kinds]
            fn.restype = None
            self._fns[name] = (fn, kinds)

    def __getattr__(self, name: str):
        fns = self.__dict__.get("_fns", {})
        if name not in fns:
            raise AttributeError(f"kernel library has no extern \"C\" function {name!r}; have: {', '.join(fns)}")
        fn, kinds = fns[name]

        def call(*args: Any) -> None:
            if len(args) != len(kinds):
                raise TypeError(f"{name} takes {len(kinds)} arguments, got {len(args)}")
            conv = []
            for a, k in zip(args, kinds):
                if k == "ptr":
                    if hasattr(a, "data_ptr"):
                        if not a.is_contiguous():
                            raise ValueError(f"{name}: tensor arguments must be contiguous")
                        conv.append(a.data_ptr())
                    else:
                        conv.append(a)
                else:
                    conv.append(a)
            KERNEL_CALLS[0] += 1
            fn(*conv)

        call.__name__ = name
        return call


def _protos_for(spec: BuildSpec) -> dict[str, list[str]]:
    protos: dict[str, list[str]] = {}
    for text in spec.sources.values():
        protos.update(parse_prototypes(text))
    return protos


def file_sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _Counted:
    """A pybind extension module whose functions count their calls (decoy-kernel check)."""

    def __init__(self, mod):
        self._mod = mod

    def __getattr__(self, name: str):
        v = getattr(self._mod, name)
        if callable(v) and not isinstance(v, type):
            def call(*a, **k):
                KERNEL_CALLS[0] += 1
                return v(*a, **k)

            call.__name__ = name
            return call
        return v


def load_built(spec: BuildSpec, so_path: str, sha256: str | None = None):
    """Import a built artefact: a CLib for lean specs, a Python module (pybind) or torch.ops library.
    ``sha256`` (from the parent's build record) is verified before the file is loaded."""
    if so_path in _LOADED:
        return _LOADED[so_path]
    if sha256 is not None and file_sha256(so_path) != sha256:
        raise RuntimeError(f"built artefact {so_path} does not match the hash recorded at build time")
    if spec.kind == "c":
        mod = CLib(so_path, _protos_for(spec))
    else:
        modname = "sk_" + so_path.rsplit("/sk_", 1)[-1].split(".so")[0]
        specm = importlib.util.spec_from_file_location(modname, so_path)
        try:
            m = importlib.util.module_from_spec(specm)
            specm.loader.exec_module(m)
            sys.modules[modname] = m
            mod = _Counted(m)
        except ImportError:  # TORCH_LIBRARY-only library without a PyInit
            import torch

            torch.ops.load_library(so_path)
            mod = torch.ops
    _LOADED[so_path] = mod
    return mod


def preload(spec: BuildSpec, so_path: str, sha256: str | None = None) -> None:
    """Worker side: verify and load an artefact before the candidate's Python runs."""
    load_built(spec, so_path, sha256)


def install_prebuilt(entries: list[dict]) -> None:
    """Worker side: register the parent's build results and route load_c / load_inline to them."""
    import torch.utils.cpp_extension as ce

    for e in entries:
        _PREBUILT[e["spec_key"]] = e
    ce.load_inline = _load_inline_prebuilt


def _lookup(spec: BuildSpec):
    e = _PREBUILT.get(spec.key())
    if e is None:
        raise RuntimeError(f"kernel sources for {spec.name!r} differ from those extracted before the run "
                           "(sources must be static literals)")
    return load_built(spec, e["so_path"], e.get("so_sha256"))


def _load_inline_prebuilt(name, cpp_sources, cuda_sources=None, sycl_sources=None, functions=None, extra_cflags=None,
                          extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None, **_ignored):
    kw = dict(name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources, functions=functions,
              extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags)
    backend = _PREBUILT_BACKEND[0]
    return _lookup(spec_from_load_inline({k: v for k, v in kw.items() if v is not None}, backend))


_PREBUILT_BACKEND = ["cpu"]


def load_c(name: str, source: str | None = None, sources: dict[str, str] | None = None,
           extra_cflags: list[str] | None = None, extra_ldflags: list[str] | None = None):
    """Load lean ``extern "C"`` kernels (prebuilt in the harness; built on the fly otherwise)."""
    kw: dict[str, Any] = {"name": name}
    if sources is not None:
        kw["sources"] = sources
    else:
        kw["source"] = source
    if extra_cflags:
        kw["extra_cflags"] = extra_cflags
    if extra_ldflags:
        kw["extra_ldflags"] = extra_ldflags
    spec = spec_from_load_c(kw, _PREBUILT_BACKEND[0])
    if _PREBUILT:
        return _lookup(spec)
    from shiftkit.kernels.build import build

    res = build(spec)
    if not res.ok:
        msg = "; ".join(f"{e.file}:{e.line}: {e.message}" for e in res.errors)
        raise RuntimeError(f"build of {name!r} failed: {msg}")
    return load_built(spec, res.so_path)
