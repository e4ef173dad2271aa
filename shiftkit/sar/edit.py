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


HASH_SAMPLE = 1 << 20  # elements hashed per tensor (all of them for smaller tensors)


def tensor_hash(t: torch.Tensor, sample: int = HASH_SAMPLE) -> str:
    """blake2b-128 fingerprint of a tensor: dtype, shape and its raw bytes, or for tensors with more
    than ``sample`` elements an evenly strided sample of ``sample`` elements plus the first and last
    4096 (hashing every byte of every tensor cost ~5% of an extract; a sample still catches another
    base, a re-initialised or retrained tensor, a dtype or shape change). Not a defence against
    edits crafted to dodge the sample."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{t.dtype}:{tuple(t.shape)}".encode())
    flat = t.detach().reshape(-1)
    if flat.numel() > sample:
        h.update(f"sample:{sample}".encode())
        step = flat.numel() // sample
        flat = torch.cat([flat[:4096], flat[::step][:sample], flat[-4096:]])
    flat = flat.contiguous().cpu()
    h.update(flat.view(torch.uint8).numpy().data if flat.numel() else b"")
    return h.hexdigest()


class BasisCache:
    """In-memory LRU of base decompositions keyed by (base tensor hash, base rank, vectors needed).

    Extraction, sweeps and merges over the same base reuse each decomposition. ``max_bytes`` bounds
    the memory held (the projector's reference to W_0 itself is counted).
    """

    def __init__(self, max_bytes: int = 256 << 20):
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


def _angles(P_xk: torch.Tensor) -> torch.Tensor:
    """Principal angles (deg) between span(X) (orthonormal k columns) and the base subspace, from the
    projected columns P X: their singular values are the cosines."""
    with la.small_op_threads():
        cos = torch.linalg.svdvals(P_xk.double()).clamp(0, 1)
    return torch.rad2deg(torch.arccos(cos))


def _diagnostics(dW2: float, S_k, B_mq, A_qn, rel: float, PU_mk=None, PV_kn=None) -> dict[str, Any]:
    k2 = float(S_k.double().pow(2).sum())
    out2 = la.lowrank_fro2(B_mq, A_qn)
    st: dict[str, Any] = {
        "energy_lowrank": k2 / dW2 if dW2 > 0 else 1.0,  # ||dW_k||^2 / ||dW||^2
        "energy_projection": out2 / k2 if k2 > 0 else 1.0,  # ||P(dW_k)||^2 / ||dW_k||^2
        "energy_total": out2 / dW2 if dW2 > 0 else 1.0,  # ||P(dW_k)||^2 / ||dW||^2
    }
    if PU_mk is not None and PU_mk.shape[1]:
        ang_l, ang_r = _angles(PU_mk), _angles(PV_kn.T)
        st.update(angle_left_mean=float(ang_l.mean()), angle_left_max=float(ang_l.max()),
                  angle_right_mean=float(ang_r.mean()), angle_right_max=float(ang_r.max()))
    return st


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
    """One edit per delta rank, from one truncated SVD of dW (at the largest rank) and one base basis.

    With the full mask the base projection is applied once, to the largest-rank factors' k columns
    (U_mk and Vh_kn, O(m n k)), and every rank takes the leading columns of the result (the projection
    acts column by column, so P(U)[:, :k] = P(U[:, :k])). ``stats["delta_rel_norm"]`` =
    ||dW|| / ||W0|| is always filled (the caller's "fine-tuned from this base?" check).
    """
    dev = resolve_device(opts.device)
    W0 = W0_mn.to(dev, torch.float32)
    dW = W1_mn.to(dev, torch.float32, copy=True)
    dW.sub_(W0)
    m, n = dW.shape
    dW2 = float(torch.linalg.vector_norm(dW)) ** 2  # fp32 (cascaded) sums: ~1e-6 relative, plenty for ratios
    rel = dW2 ** 0.5 / max(float(torch.linalg.vector_norm(W0)), 1e-30)
    exact = opts.solver == "exact" or (opts.solver == "auto" and min(m, n) <= 256)
    svd_err = 0.0
    if not exact:
        S_spec = la.singular_values_gram(dW) if any(s.kind == "energy" for s in delta_ranks) else None
        ks = [la.resolve_rank(s, m, n, S_spec) for s in delta_ranks]
        U_all, S_all, Vh_all, errs = la.randomized_svd(dW, max(ks), opts.oversample, opts.niter, opts.seed, ks=ks)
        svd_err = max(errs)
        exact = opts.solver == "auto" and svd_err > la.AUTO_MAX_ERR  # not converged (flat spectrum): exact
    if exact:
        U_all, S_all, Vh_all = torch.linalg.svd(dW, full_matrices=False)
        ks = [la.resolve_rank(s, m, n, S_all) for s in delta_ranks]
    kmax = max(ks)
    U_all, S_all, Vh_all = U_all[:, :kmax], S_all[:kmax], Vh_all[:kmax]
    del dW
    basis = _basis(W0, opts, cache, base_hash)
    PU = PV = None
    if basis is not None and opts.mask == "full":
        PU, PV = basis.project_left(U_all), basis.project_right(Vh_all)
    out = []
    for k in ks:
        U, S, Vh = U_all[:, :k], S_all[:k], Vh_all[:k]
        s = S.clamp_min(0).sqrt()
        if basis is None:
            B, A = U * s, s[:, None] * Vh
        elif opts.mask == "full":
            B, A = PU[:, :k] * s, s[:, None] * PV[:k]
        else:
            B, A = la.sar_factors(U, S, Vh, basis, opts.mask)
        stats = {"m": m, "n": n, "k": int(k), "q": int(B.shape[1]), "r": basis.rank if basis is not None else 0,
                 "basis": basis.kind if basis is not None else "none", "delta_rel_norm": rel,
                 "solver": "exact" if exact else "randomized", "svd_err_est": svd_err}
        if diagnostics:
            if basis is not None and PU is None:  # masks: angles from the explicit base vectors
                pu, pv = basis.project_left(U), basis.project_right(Vh)
            else:
                pu, pv = (PU[:, :k], PV[:k]) if PU is not None else (None, None)
            stats.update(_diagnostics(dW2, S, B, A, rel, pu, pv))
        out.append(MatrixEdit(B.float().cpu(), A.float().cpu(), stats))
    return out
