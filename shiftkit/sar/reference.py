"""A plain transcription of the official SAR script, used as the golden reference in tests and benchmarks.

Source: ``zzlsms/RL-Rewiring`` ``scripts/svd_rewire_parallel.py`` (HEAD 7a426a4), per weight matrix::

    D = W1 - W0;  Ud, sd, Vdt = svd(D);  k = max(1, int(len(sd) * delta_fraction))
    Dk = Ud[:, :k] diag(sd[:k]) Vdt[:k]
    U0, s0, V0t = svd(W0);  r = min(svd_rank, len(s0))
    M = U0[:, :r]^T Dk V0t[:r]^T;  W_sar = W0 + U0[:, :r] M V0t[:r]

Two full SVDs per matrix, fp32. The knobs the official script does not have (absolute/energy delta
rank, fraction/energy base rank, masks on M, ``projection: none``) are applied here in the same plain
way, so every option combination of the fast path has a reference.
"""

from __future__ import annotations

import torch

from shiftkit.sar.linalg import RankSpec, resolve_rank


def official_sar_delta(W0_mn: torch.Tensor, W1_mn: torch.Tensor, delta_rank: RankSpec,
                       base_rank: RankSpec = RankSpec("full"), mask: str = "full",
                       projection: str = "spectral") -> torch.Tensor:
    """The SAR edit W_sar - W0 (fp32, m x n), computed with two full SVDs."""
    W0, W1 = W0_mn.float(), W1_mn.float()
    m, n = W0.shape
    D = W1 - W0
    Ud, sd, Vdt = torch.linalg.svd(D, full_matrices=False)
    k = resolve_rank(delta_rank, m, n, sd)
    Dk = Ud[:, :k] @ torch.diag(sd[:k]) @ Vdt[:k]
    if projection == "none":
        return Dk
    U0, s0, V0t = torch.linalg.svd(W0, full_matrices=False)
    r = resolve_rank(base_rank, m, n, s0)
    U, Vt = U0[:, :r], V0t[:r]
    M = U.T @ Dk @ Vt.T
    if mask == "diagonal":
        M = torch.diag(torch.diagonal(M))
    elif mask == "off_diagonal":
        M = M - torch.diag(torch.diagonal(M))
    return U @ M @ Vt


def official_sar(W0_mn: torch.Tensor, W1_mn: torch.Tensor, delta_fraction: float = 0.01,
                 svd_rank: int = 1_000_000) -> torch.Tensor:
    """Exactly the official defaults: returns W_sar in W0's dtype."""
    m, n = W0_mn.shape
    base = RankSpec("full") if svd_rank >= min(m, n) else RankSpec("absolute", svd_rank)
    d = official_sar_delta(W0_mn, W1_mn, RankSpec("fraction", delta_fraction), base)
    return (W0_mn.float() + d).to(W0_mn.dtype)
