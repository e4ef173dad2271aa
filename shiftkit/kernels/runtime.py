"""What solutions call at import time to get their kernels.

- :func:`load_c` loads a lean C ABI library: every ``extern "C"`` function of the sources becomes a Python
  callable taking tensors (passed as data pointers), integers and floats. The argument types come from
  the compiler itself: the build reads them from the artefact's debug information (DWARF), so macros,
  typedefs, ``extern "C" { ... }`` blocks, array parameters and ``std::int64_t`` are all what the compiler
  says they are. Tensors must be contiguous (checked).
- Inside an evaluation worker, :func:`install_prebuilt` makes ``load_c`` and
  ``torch.utils.cpp_extension.load_inline`` return the artefacts the trusted parent built; a call whose
  sources differ from the statically extracted ones fails.
- Outside the harness (a user experimenting), ``load_c`` builds on the fly through :mod:`build`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from typing import Any

from shiftkit.kernels.specs import BuildSpec, spec_from_load_c, spec_from_load_inline

_PREBUILT: dict[str, dict] = {}  # spec key (no salt) -> build entry
_LOADED: dict[str, Any] = {}  # artefact path -> loaded module
_BACKEND = ["cpu"]
_CT = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "u64": ctypes.c_uint64, "i32": ctypes.c_int32,
       "u32": ctypes.c_uint32, "i16": ctypes.c_int16, "u16": ctypes.c_uint16, "i8": ctypes.c_int8, "u8": ctypes.c_uint8,
       "bool": ctypes.c_bool, "f32": ctypes.c_float, "f64": ctypes.c_double}


class CLib:
    """Callable ``extern "C"`` functions of a lean kernel library; ``protos``: {name: [arg kind, ...]};
    ``returns``: {name: return kind}: a call returns the function's scalar (int, float or bool; a pointer as
    an int), or None for void."""

    def __init__(self, so_path: str, protos: dict[str, list[str]], returns: dict[str, str] | None = None):
        self._lib = ctypes.CDLL(so_path)
        self._fns = {}
        for name, kinds in protos.items():
            ret = (returns or {}).get(name, "void")
            bad = [k for k in kinds if k not in _CT] + ([f"{ret} (return)"] if ret != "void" and ret not in _CT else [])
            fn = getattr(self._lib, name)
            if not bad:
                fn.argtypes = [_CT[k] for k in kinds]
                fn.restype = _CT[ret] if ret != "void" else None
            self._fns[name] = (fn, kinds, bad)

    def __getattr__(self, name: str):
        fns = self.__dict__.get("_fns", {})
        if name not in fns:
            raise AttributeError(f"kernel library has no extern \"C\" function {name!r}; have: {', '.join(fns)}")
        fn, kinds, bad = fns[name]
        if bad:
            raise TypeError(f"extern \"C\" {name}: unsupported argument type(s) {', '.join(bad)} "
                            "(use pointers, integers, float, double or bool)")

        def call(*args: Any) -> Any:
            if len(args) != len(kinds):
                raise TypeError(f"{name} takes {len(kinds)} arguments, got {len(args)}")
            conv = []
            for a, k in zip(args, kinds):
                if k == "ptr" and hasattr(a, "data_ptr"):
                    if not a.is_contiguous():
                        raise ValueError(f"{name}: tensor arguments must be contiguous")
                    conv.append(a.data_ptr())
                else:
                    conv.append(a)
            return fn(*conv)

        call.__name__ = name
        return call


def load_built(kind: str, so_path: str, protos: dict | None = None, returns: dict | None = None):
    """Import a built artefact: a CLib for lean specs, else its Python module (pybind) or torch.ops."""
    if so_path in _LOADED:
        return _LOADED[so_path]
    if kind == "c":
        mod: Any = CLib(so_path, protos or {}, returns)
    else:
        specm = importlib.util.spec_from_file_location("sk_ext", so_path)  # the build's TORCH_EXTENSION_NAME
        try:
            m = importlib.util.module_from_spec(specm)
            specm.loader.exec_module(m)
            sys.modules[f"sk_ext_{len(_LOADED)}"] = m
            mod = m
        except ImportError:  # a TORCH_LIBRARY-only library without a PyInit
            import torch

            torch.ops.load_library(so_path)
            mod = torch.ops
    _LOADED[so_path] = mod
    return mod


def install_prebuilt(entries: list[dict], backend: str = "cpu") -> None:
    """Worker side: load every artefact (registering its custom ops) and route load_c / load_inline to them.
    An entry: {spec_key, kind, so_path, protos, returns, workspace_ext}."""
    import torch.utils.cpp_extension as ce

    _BACKEND[0] = backend
    for e in entries:
        _PREBUILT[e["spec_key"]] = e
        mod = load_built(e["kind"], e["so_path"], e.get("protos"), e.get("returns"))
        if e.get("workspace_ext"):
            sys.modules["kernel_ext"] = mod
            sys.modules["cuda_extension"] = mod
    ce.load_inline = _load_inline_prebuilt


def _lookup(spec: BuildSpec):
    e = _PREBUILT.get(spec.key())
    if e is None:
        raise RuntimeError(f"kernel sources for {spec.name!r} differ from those extracted before the run "
                           "(sources must be static literals)")
    return load_built(e["kind"], e["so_path"], e.get("protos"), e.get("returns"))


def _load_inline_prebuilt(name, cpp_sources, cuda_sources=None, sycl_sources=None, functions=None, extra_cflags=None,
                          extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None, **_ignored):
    kw = dict(name=name, cpp_sources=cpp_sources, cuda_sources=cuda_sources, functions=functions,
              extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags)
    return _lookup(spec_from_load_inline({k: v for k, v in kw.items() if v is not None}, _BACKEND[0]))


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
    spec = spec_from_load_c(kw, _BACKEND[0])
    if _PREBUILT:
        return _lookup(spec)
    from shiftkit.kernels.build import build

    res = build(spec)
    if not res.ok:
        msg = "; ".join(f"{e.file}:{e.line}: {e.message}" for e in res.errors)
        raise RuntimeError(f"build of {name!r} failed: {msg}")
    return load_built(spec.kind, res.so_path, res.protos, res.returns)
