"""The SAR edit of one weight matrix (fast path), a sweep over delta ranks, and the base-basis cache.

``sar_edit_matrix`` is the only entry point the streaming code uses; it composes the pure functions
of :mod:`shiftkit.sar.linalg` and returns factors plus per-matrix diagnostics.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
from typing import Any

import torch

from shiftkit.sar import linalg as la
from shiftkit.sar.linalg import BaseBasis, RankSpec


@dataclasses.dataclass(frozen=True)
class EditOptions:
    """Numeric options of the edit (plain values; see :class:`shiftkit.sar.config.SARConfig`)."""

    delta_rank: RankSpec = RankSpec("fraction", 0.01)
    base_rank: RankSpec = RankSpec("full")
    mask: str = "full"  # full | diagonal | off_diagonal
    projection: str = "spectral"  # spectral | none
    solver: str = "auto"  # auto | exact | randomized
    niter: int = 16
    oversample: int = 10
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        if self.mask not in ("full", "diagonal", "off_diagonal"):
            raise ValueError(f"unknown mask '{self.mask}' (use full, diagonal or off_diagonal)")
        if self.projection not in ("spectral", "none"):
            raise ValueError(f"unknown projection '{self.projection}' (use spectral or none)")
        if self.projection == "none" and self.mask != "full":
            raise ValueError("mask diagonal/off_diagonal needs projection=spectral")
        if self.solver not in ("auto", "exact", "randomized"):
            raise ValueError(f"unknown solver '{self.solver}' (use auto, exact or randomized)")


def tensor_hash(t: torch.Tensor) -> str:
    """blake2b-128 of a tensor's dtype, shape and raw bytes."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{t.dtype}:{tuple(t.shape)}".encode())
    t = t.detach().contiguous().cpu()
    h.update(t.reshape(-1).view(torch.uint8).numpy().data if t.numel() else b"")
    return h.hexdigest()


class BasisCache:
    """In-memory LRU of base decompositions keyed by (base tensor hash, base rank, vectors needed).

    Extraction, sweeps and merges over the same base reuse each decomposition. ``max_bytes`` bounds
    the memory held (the projector's reference to W_0 itself is counted).
    """

    def __init__(self, max_bytes: int = 2 << 30):
        self.max_bytes = max_bytes
        self._d: collections.OrderedDict[tuple, tuple[BaseBasis, int]] = collections.OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, W0_mn: torch.Tensor, spec: RankSpec, need_vectors: bool, key_hash: str | None = None) -> BaseBasis:
        key = (key_hash or tensor_hash(W0_mn), str(spec), spec.kind, need_vectors)
        if key in self._d:
            self.hits += 1
            self._d.move_to_end(key)
            return self._d[key][0]
        self.misses += 1
        basis = la.base_basis(W0_mn, spec, need_vectors=need_vectors)
        size = basis.nbytes() + (basis.W_mn.numel() * basis.W_mn.element_size() if basis.W_mn is not None else 0)
        if size <= self.max_bytes:
            self._d[key] = (basis, size)
            while sum(s for _, s in self._d.values()) > self.max_bytes:
                self._d.popitem(last=False)
        return basis


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclasses.dataclass
class MatrixEdit:
    """Factors of one matrix's edit (``B_mq @ A_qn`` on CPU, fp32) and its diagnostics."""

    B_mq: torch.Tensor
    A_qn: torch.Tensor
    stats: dict[str, Any]


def _diagnostics(dW_mn, U_mk, S_k, Vh_kn, basis, B_mq, A_qn, W0_norm: float) -> dict[str, Any]:
    dW2 = float(dW_mn.double().pow(2).sum())
    k2 = float(S_k.double().pow(2).sum())
    out2 = la.lowrank_fro2(B_mq, A_qn)
    st: dict[str, Any] = {
        "delta_rel_norm": (dW2 ** 0.5) / max(W0_norm, 1e-30),
        "energy_lowrank": k2 / dW2 if dW2 > 0 else 1.0,  # ||dW_k||^2 / ||dW||^2
        "energy_projection": out2 / k2 if k2 > 0 else 1.0,  # ||P(dW_k)||^2 / ||dW_k||^2
        "energy_total": out2 / dW2 if dW2 > 0 else 1.0,  # ||P(dW_k)||^2 / ||dW||^2
    }
    if basis is not None:
        # cosines of the principal angles between span(U_k) and span(U0) are the singular values of P U_k
        cos_l = torch.linalg.svdvals(basis.project_left(U_mk).double()).clamp(0, 1)
        cos_r = torch.linalg.svdvals(basis.project_right(Vh_kn).double()).clamp(0, 1)
        ang_l, ang_r = torch.rad2deg(torch.arccos(cos_l)), torch.rad2deg(torch.arccos(cos_r))
        st.update(angle_left_mean=float(ang_l.mean()), angle_left_max=float(ang_l.max()),
                  angle_right_mean=float(ang_r.mean()), angle_right_max=float(ang_r.max()))
    return st


def _edit_from_svd(dW, U, S, Vh, basis, opts: EditOptions, W0_norm: float, diagnostics: bool) -> MatrixEdit:
    B, A = la.sar_factors(U, S, Vh, basis, opts.mask)
    stats = {"m": dW.shape[0], "n": dW.shape[1], "k": int(S.numel()), "q": int(B.shape[1]),
             "r": basis.rank if basis is not None else 0, "basis": basis.kind if basis is not None else "none"}
    if diagnostics:
        stats.update(_diagnostics(dW, U, S, Vh, basis, B, A, W0_norm))
    return MatrixEdit(B.float().cpu(), A.float().cpu(), stats)


def _basis(W0, opts: EditOptions, cache: BasisCache | None, key_hash: str | None) -> BaseBasis | None:
    if opts.projection == "none":
        return None
    need_vec = opts.mask != "full"
    if cache is not None:
        return cache.get(W0, opts.base_rank, need_vec, key_hash)
    return la.base_basis(W0, opts.base_rank, need_vectors=need_vec)


def sar_edit_matrix(W0_mn: torch.Tensor, W1_mn: torch.Tensor, opts: EditOptions,
                    cache: BasisCache | None = None, base_hash: str | None = None,
                    diagnostics: bool = True) -> MatrixEdit:
    """Fast SAR edit of one matrix: factors with W0 + B A == official W_sar (up to fp32 rounding)."""
    return sar_sweep_matrix(W0_mn, W1_mn, opts, [opts.delta_rank], cache, base_hash, diagnostics)[0]


def sar_sweep_matrix(W0_mn: torch.Tensor, W1_mn: torch.Tensor, opts: EditOptions, delta_ranks: list[RankSpec],
                     cache: BasisCache | None = None, base_hash: str | None = None,
                     diagnostics: bool = True) -> list[MatrixEdit]:
    """One edit per delta rank, from one truncated SVD of dW (at the largest rank) and one base basis."""
    dev = resolve_device(opts.device)
    W0 = W0_mn.to(dev, torch.float32)
    dW = W1_mn.to(dev, torch.float32) - W0
    m, n = dW.shape
    exact = opts.solver == "exact" or (opts.solver == "auto" and min(m, n) <= 256)
    if exact:
        U_all, S_all, Vh_all = torch.linalg.svd(dW, full_matrices=False)
        ks = [la.resolve_rank(s, m, n, S_all) for s in delta_ranks]
    else:
        S_spec = la.singular_values_gram(dW) if any(s.kind == "energy" for s in delta_ranks) else None
        ks = [la.resolve_rank(s, m, n, S_spec) for s in delta_ranks]
        U_all, S_all, Vh_all = la.randomized_svd(dW, max(ks), opts.oversample, opts.niter, opts.seed)
    basis = _basis(W0, opts, cache, base_hash)
    W0_norm = float(W0.double().norm()) if diagnostics else 1.0
    return [_edit_from_svd(dW, U_all[:, :k], S_all[:k], Vh_all[:k], basis, opts, W0_norm, diagnostics) for k in ks]
