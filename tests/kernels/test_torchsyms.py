"""Torch's own runtime code (shiftkit.kernels.torchsyms): Sleef and the fill kernel, found by torch's symbol
table, and Sleef as a link-time class of torch bindings (redteam3 hn03: at::vec's exp links Sleef_expf8_u10;
hn18: torch.zeros of a 16 MB output). The pure tests use hand-written nm lines; one test reads the installed
libtorch_cpu."""

import os

import torch

from shiftkit.kernels import symbols, torchsyms

FILL = "at::native::(anonymous namespace)::fill_kernel(at::TensorIterator&, c10::Scalar const&)"


def test_runtime_symbol_names():
    assert torchsyms.runtime_symbol("Sleef_expf8_u10")
    assert torchsyms.runtime_symbol(FILL) and torchsyms.runtime_symbol(FILL + " [clone .cold]")
    assert torchsyms.runtime_symbol("void c10::function_ref<void (char**, long const*, long, long)>::callback_fn<at::native::"
                                    "AVX2::VectorizedLoop2d<" + FILL + "::{lambda()#1}::operator()() const::{lambda(float)#1}>>")
    for other in ("at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)",
                  "at::native::(anonymous namespace)::index_fill_kernel(at::TensorIterator&, long, long, long, c10::Scalar const&)",
                  "at::native::(anonymous namespace)::exp_kernel(at::TensorIteratorBase&)", "at::cpu::mm(at::Tensor const&)",
                  "xSleef_expf8_u10", ""):
        assert not torchsyms.runtime_symbol(other), other


def test_ranges_from_nm_hand_computed():
    text = "\n".join([
        f"0000000000001000 0000000000000100 t {FILL}",
        "0000000000001100 0000000000000010 T Sleef_expf8_u10",  # adjacent: merged with the fill kernel
        "0000000000003000 0000000000000020 T Sleef_logf8_u10",
        "0000000000002000 0000000000000040 t at::native::(anonymous namespace)::exp_kernel(at::TensorIteratorBase&)",
        "0000000000004000 0000000000000008 D Sleef_table",  # data, not code
        "0000000000005000 0000000000000000 T Sleef_empty",  # no size
        "garbage line",
    ])
    assert torchsyms.ranges_from_nm(text) == [(0x1000, 0x1110), (0x3000, 0x3020)]
    assert torchsyms.ranges_from_nm("") == []


def test_installed_libtorch_has_sleef_and_fill_ranges(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torchsyms, "_MEMO", {})  # read from the library, not this process's memo
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    ranges = torchsyms.runtime_ranges(lib)
    from elftools.elf.elffile import ELFFile

    with open(lib, "rb") as f:
        sym = ELFFile(f).get_section_by_name(".dynsym").get_symbol_by_name("Sleef_expf8_u10")[0]
    assert any(lo <= sym["st_value"] < hi for lo, hi in ranges)
    assert 0 < sum(hi - lo for lo, hi in ranges) < 8 << 20  # a small part of a ~400 MB library
    assert list((tmp_path / "shiftkit" / "torchsyms").glob("*.json"))  # cached on disk for the next process


def test_sleef_is_a_link_class_of_torch_bindings_only():
    assert symbols.forbidden_imports(["Sleef_expf8_u10", "Sleef_logd4_u35"], "torch", {}) == []
    assert symbols.forbidden_imports(["Sleef_expf8_u10"], "c", {}) == ["Sleef_expf8_u10"]  # lean builds do not link torch


def test_attribution_counts_sleef_as_runtime_and_other_torch_code_as_torch(tmp_path, monkeypatch):
    """This process's own libtorch_cpu mapping: an instruction in Sleef_expf8_u10 is runtime, one in an
    exported BLAS routine of the same library (CAXPY) stays torch, and one in Sleef whose page is no longer
    the file's (copy-on-write after a write) would be foreign to the runtime: checked by the page test."""
    import ctypes

    from shiftkit.kernels import perf

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    sleef = ctypes.cast(lib.Sleef_expf8_u10, ctypes.c_void_p).value
    blas = ctypes.cast(lib.CAXPY, ctypes.c_void_p).value
    a = perf.Attribution(set())
    me = os.getpid()
    batch = a.add([(me, 0, sleef + 4), (me, 0, blas + 4)])
    assert batch["runtime"] == 1 and batch["torch"] == 1, batch
    # the page check: a Sleef page that is not a clean file page does not count as runtime
    monkeypatch.setattr(perf, "clean_file_pages", lambda pid, lo, hi: False)
    a2 = perf.Attribution(set())
    assert a2.add([(me, 0, sleef + 4)])["runtime"] == 0
