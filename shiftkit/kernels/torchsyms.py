"""Torch's own code that the attribution counts as runtime, found by torch's own symbol table.

Two classes of code inside ``libtorch_cpu`` are not torch *computing the problem*:

- **Sleef**, the vector math library torch bundles (``Sleef_expf8_u10``, ...): ATen's own vector header
  (``at::vec::Vectorized<float>::exp``) calls it from an honest binding, as a lean kernel calls libm or
  libmvec, which are runtime (redteam3 hn03);
- **the fill kernel** (``at::native::(anonymous namespace)::fill_kernel`` and the loops instantiated with its
  lambda): ``torch.zeros``/``full``/``fill_`` of an output, allocation with its initialisation, which the op
  blocker already allows (redteam3 hn18: a 16 MB ``torch.zeros`` was a quarter of an honest kernel's time).

Sleef counts as runtime **only where the candidate's own code called it** (perf.Attribution): ATen's own
kernels call it too (``torch.atan2``: most of its time is in ``Sleef_atan2f8_u10``; redteam4 h01/h17), and that
is torch computing. The caller is read from the sampled stack with the library's own call-frame information
(``.eh_frame``), for Sleef's FDEs only (:func:`unwind_rows_from_file`). The fill kernel stays runtime whoever
called it (always ATen's fill): it writes one constant, data-independent, so it cannot carry the problem's work.

The ranges are read with ``nm`` from the installed library (its ``.symtab``; torch's wheels are not stripped),
and the unwind rows from its ``.eh_frame_hdr``/``.eh_frame``, which no candidate can change: a candidate that
remaps torch's pages is judged by the attribution's mapping checks first. Reading takes ~2-15 s of CPU, so
both are cached per library file (path, size, mtime) in memory and on disk.
"""

from __future__ import annotations

import hashlib
import struct
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

# whole demangled names (clones such as ``[clone .cold]`` included) and names nested in the fill kernel's lambda
_FILL = "at::native::(anonymous namespace)::fill_kernel(at::TensorIterator&, c10::Scalar const&)"
_SLEEF_NAME = re.compile(r"Sleef_\w+")
_RUNTIME_NAME = re.compile(r"Sleef_\w+|" + re.escape(_FILL) + r"(?: \[clone [.\w]+\])*")
_RUNTIME_INSIDE = re.compile(re.escape(_FILL) + r"::\{lambda")

_MEMO: dict[tuple, dict] = {}


def runtime_symbol(name: str) -> bool:
    """Pure: a demangled symbol of torch's library that counts as runtime (see the module docstring)."""
    return bool(_RUNTIME_NAME.fullmatch(name) or _RUNTIME_INSIDE.search(name))


def sleef_symbol(name: str) -> bool:
    """Pure: a demangled symbol of torch's library that is Sleef's (runtime only when the candidate called it)."""
    return bool(_SLEEF_NAME.fullmatch(name))


def ranges_from_nm(text: str, which=runtime_symbol) -> list[tuple[int, int]]:
    """Pure: sorted, merged ``[lo, hi)`` virtual-address ranges of the runtime functions (``which``: the names
    taken) in ``nm -C -S --defined-only`` output (lines ``value size type name``; text symbols only)."""
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in ("t", "T", "W", "w", "i"):
            continue
        try:
            lo, size = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        if size and which(parts[3]):
            out.append((lo, lo + size))
    out.sort()
    merged: list[tuple[int, int]] = []
    for lo, hi in out:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shiftkit" / "torchsyms"


def runtime_ranges(path: str) -> list[tuple[int, int]]:
    """The runtime ranges (virtual addresses relative to the library's load base) of torch library ``path``."""
    return library_table(path)["runtime"]


def sleef_ranges(path: str) -> list[tuple[int, int]]:
    """Sleef's ranges in torch library ``path`` (a subset of :func:`runtime_ranges`)."""
    return library_table(path)["sleef"]


def unwind_rows(path: str) -> list[tuple]:
    """The unwind rows (lo, hi, cfa_reg, cfa_off, ra_off, bp_off) of torch library ``path`` over Sleef's ranges
    (:func:`unwind_rows_from_file`)."""
    return library_table(path)["unwind"]


def library_table(path: str) -> dict:
    """{"runtime", "sleef", "unwind"} of torch library ``path``, cached per file (path, size, mtime) in memory
    and on disk."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, "v3")
    if key in _MEMO:
        return _MEMO[key]
    f = _cache_dir() / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".json")
    try:
        t = json.loads(f.read_text())
        t = {k: [tuple(r) for r in t[k]] for k in ("runtime", "sleef", "unwind")}
    except (OSError, ValueError, KeyError, TypeError):
        p = subprocess.run(["nm", "-C", "-S", "--defined-only", path], capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise OSError(f"nm {path} failed: {p.stderr.strip()[:200]}")
        sleef = ranges_from_nm(p.stdout, sleef_symbol)
        try:
            rows = unwind_rows_from_file(path, sleef)
        except (OSError, ValueError, IndexError, struct.error):
            rows = []  # no rows: no Sleef sample unwinds, all stay torch
        t = {"runtime": ranges_from_nm(p.stdout), "sleef": sleef, "unwind": rows}
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=f.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(t, fh)
            os.replace(tmp, f)
        except OSError:
            pass  # an unwritable cache only costs the next process the read
    _MEMO[key] = t
    return t


# ----------------------------------------------------------------------------- one frame up from the runtime code

# A Sleef sample counts as runtime only when the candidate's own code called Sleef (perf.Attribution). The caller
# is read from the sampled stack with the library's own call-frame information (``.eh_frame``, DWARF CFI), for
# the FDEs covering the runtime ranges only (found through ``.eh_frame_hdr``'s sorted table). Each row says, for
# the addresses [lo, hi): CFA = reg + off (x86-64 DWARF reg 7 = rsp, 6 = rbp), the return address is saved at
# CFA + ra_off, and rbp at CFA + bp_off (None: rbp is not saved, the caller's rbp is the sampled one). Rows whose
# rule is anything else (a DWARF expression, an RA held in a register) are left out: no row, no unwind, and the
# sample stays torch (fails towards rejection).
DW_RSP, DW_RBP = 7, 6


def _leb(b: bytes, i: int, signed: bool) -> tuple[int, int]:
    """A LEB128 number at ``b[i]``: ``(value, next index)``."""
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return (v - (1 << s) if signed and c & 0x40 else v), i


def _uleb(b: bytes, i: int) -> tuple[int, int]:
    return _leb(b, i, False)


def _sleb(b: bytes, i: int) -> tuple[int, int]:
    return _leb(b, i, True)


_PTR_FMT = {0x00: "<Q", 0x02: "<H", 0x03: "<I", 0x04: "<Q", 0x0A: "<h", 0x0B: "<i", 0x0C: "<q"}


def _ptr(b: bytes, i: int, enc: int, addr_of: int) -> tuple[int, int]:
    """A pointer of DWARF encoding ``enc`` at b[i] (``addr_of``: the virtual address of b[i], for pcrel)."""
    if enc == 0xFF:
        raise ValueError("omitted pointer")
    fmt, app = enc & 0x0F, enc & 0x70
    if fmt == 0x01:
        v, j = _uleb(b, i)
    elif fmt == 0x09:
        v, j = _sleb(b, i)
    elif fmt in _PTR_FMT:
        v, = struct.unpack_from(_PTR_FMT[fmt], b, i)
        j = i + struct.calcsize(_PTR_FMT[fmt])
    else:
        raise ValueError(f"pointer format {enc:#x}")
    if app == 0x10:
        v += addr_of
    elif app != 0 or enc & 0x80:
        raise ValueError(f"pointer application {enc:#x}")
    return v & (1 << 64) - 1, j


def _cie(b: bytes, i: int, addr: int) -> dict:
    """The CIE at b[i] (``addr``: the section's virtual address)."""
    length, = struct.unpack_from("<I", b, i)
    if length == 0xFFFFFFFF:
        raise ValueError("64-bit CFI")
    end = i + 4 + length
    j = i + 8  # past length and CIE id
    version = b[j]
    j += 1
    k = b.index(b"\0", j)
    aug = b[j:k].decode()
    j = k + 1
    if "eh" in aug:
        raise ValueError("eh augmentation")
    code_align, j = _uleb(b, j)
    data_align, j = _sleb(b, j)
    if version == 1:
        ra, j = b[j], j + 1
    else:
        ra, j = _uleb(b, j)
    fde_enc, has_z = 0x00, aug.startswith("z")
    if has_z:
        alen, j = _uleb(b, j)
        after = j + alen
        for ch in aug[1:]:
            if ch == "R":
                fde_enc, j = b[j], j + 1
            elif ch == "L":
                j += 1
            elif ch == "P":
                penc, j = b[j], j + 1
                _, j = _ptr(b, j, penc & 0x7F, addr + j)  # the personality routine's address: not needed
            elif ch in "SB":
                continue
            else:
                break  # an unknown augmentation: the length tells where it ends
        j = after
    elif aug:
        raise ValueError(f"augmentation {aug!r}")
    return {"code_align": code_align, "data_align": data_align, "ra": ra, "enc": fde_enc, "z": has_z,
            "init": b[j:end]}


def _run_cfi(prog: bytes, cie: dict, loc: int, end: int, state: dict, initial: dict | None,
             rows: list[tuple[int, dict]]) -> int:
    """Interpret one CFI program (DWARF 5, 6.4.2) from ``loc``; appends (address, rule snapshot) to ``rows``
    at each advance. ``state``: {"cfa": (reg, off) | None, reg: ("off", n) | ("same",) | ("other",)}."""
    ca, da = cie["code_align"], cie["data_align"]
    stack = []
    i = 0

    def advance(delta: int) -> None:
        nonlocal loc
        rows.append((loc, dict(state)))
        loc += delta * ca

    while i < len(prog):
        op = prog[i]
        i += 1
        hi2, low = op >> 6, op & 0x3F
        if hi2 == 1:
            advance(low)
        elif hi2 == 2:
            n, i = _uleb(prog, i)
            state[low] = ("off", n * da)
        elif hi2 == 3:
            state[low] = (initial or {}).get(low, ("same",))
        elif op == 0x00:
            pass
        elif op == 0x01:
            raise ValueError("DW_CFA_set_loc")
        elif op in (0x02, 0x03, 0x04):
            n = {0x02: 1, 0x03: 2, 0x04: 4}[op]
            advance(int.from_bytes(prog[i:i + n], "little"))
            i += n
        elif op in (0x05, 0x11):  # offset_extended(_sf)
            r, i = _uleb(prog, i)
            n, i = (_uleb if op == 0x05 else _sleb)(prog, i)
            state[r] = ("off", n * da)
        elif op == 0x06:  # restore_extended
            r, i = _uleb(prog, i)
            state[r] = (initial or {}).get(r, ("same",))
        elif op in (0x07, 0x08):  # undefined, same_value
            r, i = _uleb(prog, i)
            state[r] = ("same",) if op == 0x08 else ("other",)
        elif op == 0x09:  # register
            r, i = _uleb(prog, i)
            _, i = _uleb(prog, i)
            state[r] = ("other",)
        elif op == 0x0A:
            stack.append(dict(state))
        elif op == 0x0B:  # restore_state: every rule, the CFA's included (as GCC's unwinder does; DWARF 5)
            state.clear()
            state.update(stack.pop())
        elif op in (0x0C, 0x12):  # def_cfa(_sf)
            r, i = _uleb(prog, i)
            n, i = _uleb(prog, i) if op == 0x0C else _sleb(prog, i)
            state["cfa"] = (r, n if op == 0x0C else n * da)
        elif op == 0x0D:  # def_cfa_register
            r, i = _uleb(prog, i)
            c = state.get("cfa")
            state["cfa"] = (r, c[1]) if c else None
        elif op in (0x0E, 0x13):  # def_cfa_offset(_sf)
            n, i = _uleb(prog, i) if op == 0x0E else _sleb(prog, i)
            c = state.get("cfa")
            state["cfa"] = (c[0], n if op == 0x0E else n * da) if c else None
        elif op == 0x0F:  # def_cfa_expression
            n, i = _uleb(prog, i)
            i += n
            state["cfa"] = None
        elif op in (0x10, 0x16):  # expression, val_expression
            r, i = _uleb(prog, i)
            n, i = _uleb(prog, i)
            i += n
            state[r] = ("other",)
        elif op in (0x14, 0x15):  # val_offset(_sf)
            r, i = _uleb(prog, i)
            _, i = (_uleb if op == 0x14 else _sleb)(prog, i)
            state[r] = ("other",)
        elif op == 0x2E:  # GNU_args_size
            _, i = _uleb(prog, i)
        elif op == 0x2F:  # GNU_negative_offset_extended
            r, i = _uleb(prog, i)
            n, i = _uleb(prog, i)
            state[r] = ("off", -n * da)
        else:
            raise ValueError(f"CFI opcode {op:#x}")
    return loc


def fde_rows(eh: bytes, eh_addr: int, fde_at: int) -> list[tuple[int, int, int, int, int, int | None]]:
    """Pure: the unwind rows (lo, hi, cfa_reg, cfa_off, ra_off, bp_off) of the FDE at byte ``fde_at`` of an
    ``.eh_frame`` section ``eh`` loaded at ``eh_addr``; rows the unwinder cannot follow are left out. Raises
    ValueError on CFI it does not read."""
    length, cie_ptr = struct.unpack_from("<Ii", eh, fde_at)
    if length == 0xFFFFFFFF or cie_ptr == 0:
        raise ValueError("not a 32-bit FDE")
    end = fde_at + 4 + length
    cie = _cie(eh, fde_at + 4 - cie_ptr, eh_addr)
    j = fde_at + 8
    start, j = _ptr(eh, j, cie["enc"], eh_addr + j)
    size, j = _ptr(eh, j, cie["enc"] & 0x0F, 0)
    if cie["z"]:
        alen, j = _uleb(eh, j)
        j += alen
    state: dict = {"cfa": None}
    _run_cfi(cie["init"], cie, start, start + size, state, None, [])
    initial = {k: v for k, v in state.items() if k != "cfa"}
    spans: list[tuple[int, dict]] = []
    last = _run_cfi(eh[j:end], cie, start, start + size, state, initial, spans)
    spans.append((last, dict(state)))
    out = []
    for k, (lo, snap) in enumerate(spans):
        hi = spans[k + 1][0] if k + 1 < len(spans) else start + size
        hi = min(hi, start + size)
        if hi <= lo:
            continue
        cfa, ra, bp = snap.get("cfa"), snap.get(cie["ra"]), snap.get(DW_RBP, ("same",))
        if cfa is None or cfa[0] not in (DW_RSP, DW_RBP) or ra is None or ra[0] != "off":
            continue
        if bp[0] == "other":
            continue
        out.append((lo, hi, cfa[0], cfa[1], ra[1], bp[1] if bp[0] == "off" else None))
    return out


def _sections(path: str) -> dict[str, tuple[int, int, int]]:
    """name -> (file offset, virtual address, size) of an ELF64 little-endian file's sections."""
    with open(path, "rb") as f:
        h = f.read(64)
        if len(h) < 64 or h[:4] != b"\x7fELF" or h[4] != 2 or h[5] != 1:
            raise ValueError("not an ELF64 little-endian file")
        shoff, = struct.unpack_from("<Q", h, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", h, 58)
        f.seek(shoff)
        sh = f.read(shentsize * shnum)
        hdrs = [struct.unpack_from("<IIQQQQ", sh, k * shentsize) for k in range(shnum)]
        _, _, _, _, stroff, strsize = hdrs[shstrndx]
        f.seek(stroff)
        names = f.read(strsize)
    out = {}
    for name, _, _, addr, off, size in hdrs:
        out[names[name:names.index(b"\0", name)].decode(errors="replace")] = (off, addr, size)
    return out


def unwind_rows_from_file(path: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int, int, int, int, int | None]]:
    """The unwind rows of library ``path`` (virtual addresses) covering ``ranges``, clipped to them, sorted.
    An FDE that cannot be read leaves its addresses without rows (unwinding there fails: torch)."""
    import bisect

    sec = _sections(path)
    if ".eh_frame_hdr" not in sec or ".eh_frame" not in sec:
        return []
    with open(path, "rb") as f:
        off, haddr, size = sec[".eh_frame_hdr"]
        f.seek(off)
        hdr = f.read(size)
        off, eaddr, size = sec[".eh_frame"]
        f.seek(off)
        eh = f.read(size)
    if hdr[0] != 1 or hdr[3] != 0x3B:  # version 1; the table: datarel sdata4 pairs (initial location, FDE)
        return []
    _, j = _ptr(hdr, 4, hdr[1], haddr + 4)  # eh_frame_ptr
    n, j = _ptr(hdr, j, hdr[2], haddr + j)  # fde_count
    tab = struct.unpack_from(f"<{2 * n}i", hdr, j)
    locs = [haddr + tab[2 * k] for k in range(n)]
    out = []
    for lo, hi in ranges:
        k = max(bisect.bisect_right(locs, lo) - 1, 0)
        while k < n and locs[k] < hi:
            try:
                rows = fde_rows(eh, eaddr, haddr + tab[2 * k + 1] - eaddr)
            except (ValueError, IndexError, struct.error):
                rows = []
            for r in rows:
                a, b = max(r[0], lo), min(r[1], hi)
                if a < b:
                    out.append((a, b) + r[2:])
            k += 1
    out.sort()
    return out
