"""Every output page is written by the worker (shm.page_written / unwritten_pages): an untouched page, the
shared zero page, a copy-on-write page still shared with the process it was forked from, or page-cache
memory would let the parent's read do the zero-fill outside the clock (redteam3 h19). The pure tests use
hand-made pagemap entries (Documentation/admin-guide/mm/pagemap.rst: bit 63 present, 62 swapped, 61
file-page or shared-anon, 56 exclusively mapped); the process test reads a real child's pagemap."""

import mmap
import os

import pytest

from shiftkit.kernels import shm

P, S, F, X = 1 << 63, 1 << 62, 1 << 61, 1 << 56


def test_page_written_by_bit():
    assert shm.page_written(P | X | 12345)  # present, anonymous, exclusive: written by this process
    assert shm.page_written(S)  # swapped out: it had contents
    assert not shm.page_written(0)  # never touched
    assert not shm.page_written(P | 777)  # present, not exclusive: the zero page, or shared copy-on-write
    assert shm.page_written(P | X | F)  # shared memory the process faulted in (the kernel zeroed it on its clock)
    assert not shm.page_written(X)  # exclusive without present is no page at all


def test_spans_pages_covers_each_byte_and_skips_ranges():
    ps = shm.PAGE
    pieces = [(ps * 10 + 5, 0, 2 * ps), (ps * 11, 0, 1), (ps * 40, 0, 0)]  # pages 10-12; 11 again; empty
    assert shm.spans_pages(pieces) == [10, 11, 12]
    assert shm.spans_pages(pieces, skip=[(ps * 11, ps * 12)]) == [10, 12]
    assert shm.spans_pages([]) == []  # degenerate: no output bytes


def test_unwritten_pages_of_a_real_child():
    """A forked child's pages: written after the fork (counted as written), read-faulted (the zero page),
    untouched, and inherited from the parent unwritten (shared copy-on-write)."""
    ps = shm.PAGE
    priv = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    inherited = mmap.mmap(-1, ps, flags=priv)
    inherited[:1] = b"x"  # written by the parent before the fork
    m = mmap.mmap(-1, 4 * ps, flags=priv)
    r, w = os.pipe()  # child -> parent: ready
    r2, w2 = os.pipe()  # parent -> child: done looking
    pid = os.fork()
    if pid == 0:
        m[0:1] = b"a"  # page 0 written
        _ = m[ps]  # page 1 read-faulted: the zero page
        m[3 * ps:3 * ps + 1] = b"b"  # page 3 written; page 2 untouched
        os.write(w, b"k")
        os.read(r2, 1)  # wait until the parent has looked
        os._exit(0)
    try:
        assert os.read(r, 1) == b"k"
        import ctypes

        base = ctypes.addressof((ctypes.c_char * (4 * ps)).from_buffer(m))
        inh = ctypes.addressof((ctypes.c_char * ps).from_buffer(inherited))
        page = lambda i: [(base + i * ps, 0, ps)]
        assert shm.unwritten_pages(pid, page(0)) == (0, 1)
        assert shm.unwritten_pages(pid, page(1)) == (1, 1)
        assert shm.unwritten_pages(pid, page(2)) == (1, 1)
        assert shm.unwritten_pages(pid, page(3)) == (0, 1)
        assert shm.unwritten_pages(pid, [(inh, 0, ps)]) == (1, 1)  # the parent's bytes, not the child's work
        assert shm.unwritten_pages(pid, [(base, 0, 4 * ps)]) == (2, 4)
        assert shm.unwritten_pages(pid, [(base, 0, 4 * ps)], skip=[(base + ps, base + 3 * ps)]) == (0, 2)
    finally:
        os.write(w2, b"q")
        os.waitpid(pid, 0)
        for fd in (r, w, r2, w2):
            os.close(fd)


def test_pagemap_entries_one_reader_with_named_bits():
    """The one pagemap reader (shm.pagemap_entries) serves the output-page check and the attribution's clean-page
    check (perf.clean_file_pages): its named bits are the kernel's, on this process's own pages."""
    import ctypes

    assert (shm.PM_PRESENT, shm.PM_SWAPPED, shm.PM_FILE, shm.PM_EXCLUSIVE) == (P, S, F, X)
    m = mmap.mmap(-1, 3 * shm.PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m[0:1] = b"x"  # the first page written, the second untouched, the third read-faulted (the zero page)
    _ = m[2 * shm.PAGE]
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    e = shm.pagemap_entries(os.getpid(), addr // shm.PAGE, 3)
    assert len(e) == 3
    assert e[0] & shm.PM_PRESENT and e[0] & shm.PM_EXCLUSIVE and not e[0] & shm.PM_FILE
    assert not e[1] & (shm.PM_PRESENT | shm.PM_SWAPPED)
    assert [shm.page_written(x) for x in e] == [True, False, False]
    libc_text = ctypes.cast(ctypes.CDLL(None).printf, ctypes.c_void_p).value  # libc's code: a clean file page
    (t,) = shm.pagemap_entries(os.getpid(), libc_text // shm.PAGE, 1)
    assert t & shm.PM_PRESENT and t & shm.PM_FILE
    from shiftkit.kernels import perf

    page = libc_text & ~(shm.PAGE - 1)
    assert perf.clean_file_pages(os.getpid(), page, page + shm.PAGE)
    assert not perf.clean_file_pages(os.getpid(), addr, addr + shm.PAGE)  # a written anonymous page
    assert not perf.clean_file_pages(-1, page, page + shm.PAGE)  # unreadable: fails closed
    m.close()


def test_output_aliases_by_storage_overlap_and_marked_per_leaf():
    """Which reference output leaves are views of the inputs (redteam8 h01-h03): storage overlap, per leaf."""
    import torch

    from shiftkit.kernels import shm

    x, y = torch.randn(4, 6), torch.randn(3)
    out = (x[:, ::2], x + 1, {"b": y.view(3, 1)}, torch.empty(0))
    assert shm.output_aliases(out, [x, y]) == [True, False, True, False]
    assert shm.output_aliases(x.clone(), [x]) == [False] and shm.output_aliases(x, []) == [False]  # degenerate
    lay, _ = shm.layout((x[:, ::2], x + 1))
    marked = shm.mark_aliases(lay, [True, False])
    assert [lv.get("alias") for lv in shm.leaves(marked)] == [True, None] and "alias" not in str(lay)


def test_poison_overwrites_a_childs_memory_with_the_pattern_and_refuses_read_only():
    """The parent's pattern replaces a child's output bytes (process_vm_writev), exactly the spans named; the
    pattern is random bytes; memory made read-only cannot take it (RemoteReadError)."""
    import ctypes

    ps = shm.PAGE
    m = mmap.mmap(-1, 2 * ps, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = ctypes.addressof((ctypes.c_char * (2 * ps)).from_buffer(m))
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        m[:] = b"\x00" * (2 * ps)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect(ctypes.c_void_p(base + ps), ctypes.c_size_t(ps), 1)  # the second page read-only
        os.write(w, b"k")
        os.read(r2, 1)
        os._exit(0)
    try:
        assert os.read(r, 1) == b"k"
        shm.poison_memory(pid, [(base + 8, 100), (base + 200, 0)])
        got = (ctypes.c_char * 200)()
        shm.vm_read(pid, [(base, ctypes.addressof(got), 200)])
        pat = bytes(shm._POISON[:shm._POISON_WORD])
        assert got.raw[:8] == b"\x00" * 8 and got.raw[8:108] == (pat * 2)[:100] and got.raw[108:] == b"\x00" * 92
        assert len(set(pat)) > 8  # random bytes, not a constant
        with pytest.raises(shm.RemoteReadError, match="not writable|Bad address"):
            shm.poison_memory(pid, [(base + ps, 16)])
    finally:
        os.write(w2, b"q")
        os.waitpid(pid, 0)
        for fd in (r, w, r2, w2):
            os.close(fd)


def test_output_spans_per_leaf_less_aliases():
    import torch

    lay, _ = shm.layout((torch.zeros(4, 6), torch.zeros(3, dtype=torch.float64), torch.zeros(0), torch.zeros(2, 2)))
    lay = shm.mark_aliases(lay, [False, False, False, True])
    assert shm.output_spans(lay, [100, 200, 300, 400]) == [(100, 96), (200, 24)]
    assert shm.output_spans(lay, [100, 200, 300, 400], [[12, 1], None, None, None])[0] == (100, (3 * 12 + 6) * 4)
    assert shm.output_spans(lay, ["x", 200, 300, 400]) == [(200, 24)] and shm.output_spans({"t": "value", "v": 1}, []) == []
