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


def test_attribution_counts_fill_as_runtime_and_sleef_only_with_a_candidate_caller(tmp_path, monkeypatch):
    """This process's own libtorch_cpu mapping: an instruction in the fill kernel is runtime; one in
    Sleef_expf8_u10 with no sampled stack (its caller cannot be found) stays torch, as does one in an exported
    BLAS routine of the same library (CAXPY); a fill page that is not a clean file page does not count as
    runtime (the page test)."""
    import ctypes

    from shiftkit.kernels import perf

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    lib = ctypes.CDLL(path)
    sleef = ctypes.cast(lib.Sleef_expf8_u10, ctypes.c_void_p).value
    blas = ctypes.cast(lib.CAXPY, ctypes.c_void_p).value
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        base = sleef - ELFFile(f).get_section_by_name(".dynsym").get_symbol_by_name("Sleef_expf8_u10")[0]["st_value"]
    sleef_r = torchsyms.sleef_ranges(path)
    fill = next(lo for lo, hi in torchsyms.runtime_ranges(path)
                if not any(a <= lo < b for a, b in sleef_r)) + base
    a = perf.Attribution(set())
    me = os.getpid()
    batch = a.add([(me, 0, sleef + 4), (me, 0, blas + 4), (me, 0, fill)])
    assert batch["runtime"] == 1 and batch["torch"] == 2, batch
    assert a.sleef_callers == {"candidate": 0, "other": 0, "failed": 1}
    monkeypatch.setattr(perf, "clean_file_pages", lambda pid, lo, hi: False)
    a2 = perf.Attribution(set())
    assert a2.add([(me, 0, fill)])["runtime"] == 0


def _uleb(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _eh(insns, eh_addr=0x800, start=0x1000, size=0x40):
    """A CIE (zR, pcrel sdata4, CFA = rsp + 8, RA at CFA - 8) and one FDE for [start, start + size) running
    ``insns``: (section bytes, the FDE's offset)."""
    import struct

    cie_body = b"\0\0\0\0" + b"\x01" + b"zR\0" + _uleb(1) + b"\x78" + b"\x10" + _uleb(1) + b"\x1b" \
        + b"\x0c\x07\x08" + b"\x90\x01"
    cie_body += b"\0" * (-(len(cie_body) + 4) % 4)
    cie = struct.pack("<I", len(cie_body)) + cie_body
    fde_at = len(cie)
    pc_field = eh_addr + fde_at + 8
    body = struct.pack("<i", fde_at + 4) + struct.pack("<i", start - pc_field) + struct.pack("<i", size) + _uleb(0) + insns
    body += b"\0" * (-(len(body) + 4) % 4)
    return cie + struct.pack("<I", len(body)) + body, fde_at


def test_fde_rows_remember_and_restore_state_restore_the_cfa():
    """An early return inside a function: remember_state, the epilogue's CFA = rsp + 8, restore_state: the CFA
    after it is the body's again (rsp + 16; a restored state that kept the epilogue's CFA would read the return
    address from the wrong slot)."""
    insns = b"\x41" + b"\x0e\x10" + b"\x86\x02" + b"\x43" + b"\x0a" + b"\x0e\x08" + b"\x41" + b"\x0b" + b"\x42"
    eh, at = _eh(insns)
    assert torchsyms.fde_rows(eh, 0x800, at) == [
        (0x1000, 0x1001, 7, 8, -8, None), (0x1001, 0x1004, 7, 16, -8, -16), (0x1004, 0x1005, 7, 8, -8, -16),
        (0x1005, 0x1007, 7, 16, -8, -16), (0x1007, 0x1040, 7, 16, -8, -16)]


def test_fde_rows_hand_computed():
    """A CIE (zR, pcrel sdata4, CFA = rsp + 8, RA at CFA - 8) and an FDE for [0x1000, 0x1040): push rbp at +4
    (CFA = rsp + 16, rbp at CFA - 16), a 48-byte frame at +0x24 (CFA = rsp + 64)."""
    import struct

    eh_addr = 0x800
    cie_body = b"\0\0\0\0" + b"\x01" + b"zR\0" + _uleb(1) + b"\x78" + b"\x10" + _uleb(1) + b"\x1b" \
        + b"\x0c\x07\x08" + b"\x90\x01"
    cie_body += b"\0" * (-(len(cie_body) + 4) % 4)
    cie = struct.pack("<I", len(cie_body)) + cie_body
    fde_at = len(cie)
    pc_field = eh_addr + fde_at + 8
    insns = b"\x44" + b"\x0e\x10" + b"\x86\x02" + b"\x60" + b"\x0e\x40"
    body = struct.pack("<i", fde_at + 4) + struct.pack("<i", 0x1000 - pc_field) + struct.pack("<i", 0x40) + _uleb(0) + insns
    body += b"\0" * (-(len(body) + 4) % 4)
    eh = cie + struct.pack("<I", len(body)) + body
    assert torchsyms.fde_rows(eh, eh_addr, fde_at) == [
        (0x1000, 0x1004, 7, 8, -8, None), (0x1004, 0x1024, 7, 16, -8, -16), (0x1024, 0x1040, 7, 64, -8, -16)]
    # a CFA given by a DWARF expression leaves its addresses without a row (no unwind there: torch)
    eh2 = bytearray(eh)
    k = fde_at + 17 + 6  # the FDE's header is 17 bytes; def_cfa_offset 64 is its program's seventh byte
    assert eh2[k:k + 2] == b"\x0e\x40"
    eh2[k:k + 2] = b"\x0f\x00"  # def_cfa_expression of length 0 in place of def_cfa_offset 64
    assert torchsyms.fde_rows(bytes(eh2), eh_addr, fde_at) == [
        (0x1000, 0x1004, 7, 8, -8, None), (0x1004, 0x1024, 7, 16, -8, -16)]


def test_unwind_rows_of_the_installed_library_cover_sleef(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torchsyms, "_MEMO", {})
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    sleef, rows = torchsyms.sleef_ranges(lib), torchsyms.unwind_rows(lib)
    total = sum(hi - lo for lo, hi in sleef)
    assert sum(r[1] - r[0] for r in rows) > 0.9 * total  # nearly every Sleef byte has a row
    assert all(any(lo <= r[0] and r[1] <= hi for lo, hi in sleef) for r in rows)  # and only Sleef's
