"""Pure SAR math: rank specs, hand-computed edits, degenerate cases, fast path == official transcription."""

import itertools
import zlib

import pytest
import torch

from shiftkit.sar import linalg as la
from shiftkit.sar.edit import BasisCache, EditOptions, sar_edit_matrix, sar_sweep_matrix
from shiftkit.sar.linalg import RankSpec, parse_rank
from shiftkit.sar.reference import official_sar, official_sar_delta


def _delta(W0, W1, opts, **kw):
    e = sar_edit_matrix(W0, W1, opts, **kw)
    return e.B_mq @ e.A_qn, e


# ---------------------------------------------------------------- rank specs

def test_parse_rank():
    assert parse_rank("full") == RankSpec("full")
    assert parse_rank("0.01") == RankSpec("fraction", 0.01)
    assert parse_rank("1.0") == RankSpec("fraction", 1.0)
    assert parse_rank("16") == RankSpec("absolute", 16)
    assert parse_rank(8) == RankSpec("absolute", 8)
    assert parse_rank("energy:0.9") == RankSpec("energy", 0.9)
    for bad in ("0", "1.5", "energy:2", "abc", "2.5e0", "-3"):
        with pytest.raises(ValueError):
            parse_rank(bad)


def test_resolve_rank_hand_values():
    S = torch.tensor([3.0, 2.0, 1.0])  # energies 9, 4, 1 of 14
    assert la.resolve_rank(RankSpec("energy", 0.5), 3, 3, S) == 1
    assert la.resolve_rank(RankSpec("energy", 0.9), 3, 3, S) == 2  # 13/14 = 0.929
    assert la.resolve_rank(RankSpec("energy", 1.0), 3, 3, S) == 3
    assert la.resolve_rank(RankSpec("fraction", 0.01), 300, 700, None) == 3
    assert la.resolve_rank(RankSpec("fraction", 0.01), 50, 70, None) == 1  # max(1, floor(0.5))
    assert la.resolve_rank(RankSpec("fraction", 0.29), 100, 100, None) == 28  # int(28.999999999999996), as official
    assert la.resolve_rank(RankSpec("absolute", 500), 30, 70, None) == 30
    assert la.resolve_rank(RankSpec("full"), 30, 70, None) == 30
    assert la.rank_from_energy(torch.zeros(4), 0.9) == 1


# ---------------------------------------------------------------- hand-computed edits

def test_tall_projection_drops_out_of_range_rows():
    W0 = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # range = span(e1, e2)
    dW = torch.tensor([[0.5, 0.0], [0.0, 0.0], [1.0, 0.0]])  # rank 1
    opts = EditOptions(delta_rank=RankSpec("absolute", 1))
    d, e = _delta(W0, W0 + dW, opts)
    want = torch.tensor([[0.5, 0.0], [0.0, 0.0], [0.0, 0.0]])
    torch.testing.assert_close(d, want, atol=1e-6, rtol=0)
    torch.testing.assert_close(official_sar_delta(W0, W0 + dW, RankSpec("absolute", 1)), want, atol=1e-6, rtol=0)
    assert e.stats["energy_lowrank"] == pytest.approx(1.0)
    assert e.stats["energy_projection"] == pytest.approx(0.25 / 1.25)
    assert e.stats["energy_total"] == pytest.approx(0.2)
    # principal angle between (0.5, 0, 1)/|.| and span(e1, e2): arccos(0.5 / sqrt(1.25)) = 63.43 deg
    assert e.stats["angle_left_max"] == pytest.approx(63.4349, abs=1e-3)
    assert e.stats["angle_right_max"] == pytest.approx(0.0, abs=1e-3)


@pytest.mark.parametrize("mask,want", [
    ("full", [[0.1, 0.2], [0.3, 0.4]]),
    ("diagonal", [[0.1, 0.0], [0.0, 0.4]]),
    ("off_diagonal", [[0.0, 0.2], [0.3, 0.0]]),
])
def test_masks_on_diagonal_base(mask, want):
    W0 = torch.diag(torch.tensor([3.0, 1.0]))  # U0 = V0 = I (up to joint signs)
    dW = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    opts = EditOptions(delta_rank=RankSpec("absolute", 2), mask=mask)
    d, e = _delta(W0, W0 + dW, opts)
    torch.testing.assert_close(d, torch.tensor(want), atol=1e-6, rtol=0)
    assert e.stats["q"] == {"full": 2, "diagonal": 2, "off_diagonal": 4}[mask]


def test_top1_base_rank_keeps_only_leading_direction():
    W0 = torch.diag(torch.tensor([3.0, 1.0]))
    dW = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    opts = EditOptions(delta_rank=RankSpec("absolute", 2), base_rank=RankSpec("absolute", 1))
    d, _ = _delta(W0, W0 + dW, opts)
    torch.testing.assert_close(d, torch.tensor([[0.1, 0.0], [0.0, 0.0]]), atol=1e-6, rtol=0)


def test_official_defaults_are_identity_projection_on_square():
    g = torch.Generator().manual_seed(0)
    W0, dW = torch.randn(200, 200, generator=g), 0.01 * torch.randn(200, 200, generator=g)
    U, S, Vh = torch.linalg.svd(dW)
    want = U[:, :2] @ torch.diag(S[:2]) @ Vh[:2]  # k = floor(0.01 * 200) = 2
    got = official_sar(W0, W0 + dW) - W0
    assert la.rel_err(got, want) < 1e-4


# ---------------------------------------------------------------- degenerate cases

def test_zero_delta_gives_zero_edit():
    W0 = torch.randn(30, 20, generator=torch.Generator().manual_seed(1))
    d, e = _delta(W0, W0.clone(), EditOptions(delta_rank=RankSpec("absolute", 3)))
    assert torch.count_nonzero(d) == 0
    assert e.stats["energy_total"] == 1.0 and e.stats["energy_lowrank"] == 1.0


@pytest.mark.parametrize("shape", [(20, 20), (30, 20), (20, 30)])
def test_rank_deficient_base_matches_official(shape):
    g = torch.Generator().manual_seed(2)
    m, n = shape
    W0 = torch.randn(m, 3, generator=g) @ torch.randn(3, n, generator=g)  # rank 3
    dW = torch.randn(m, n, generator=g)
    for mask in ("full", "diagonal"):
        opts = EditOptions(delta_rank=RankSpec("absolute", 4), mask=mask)
        d, e = _delta(W0, W0 + dW, opts)
        assert torch.isfinite(d).all()
        if m == n or mask == "full":  # vectors beyond rank 3 are LAPACK's arbitrary completion
            assert e.stats["basis"] in ("identity", "svd")
        if m == n and mask == "full":
            ref = official_sar_delta(W0, W0 + dW, opts.delta_rank)
            assert la.rel_err(d, ref) < 1e-4


def test_zero_base_square_is_plain_truncation():
    dW = torch.randn(10, 10, generator=torch.Generator().manual_seed(3))
    d, _ = _delta(torch.zeros(10, 10), dW, EditOptions(delta_rank=RankSpec("absolute", 2)))
    ref = official_sar_delta(torch.zeros(10, 10), dW, RankSpec("absolute", 2))
    assert la.rel_err(d, ref) < 1e-5


def test_bad_options_raise():
    with pytest.raises(ValueError):
        EditOptions(mask="upper")
    with pytest.raises(ValueError):
        EditOptions(projection="none", mask="diagonal")
    with pytest.raises(ValueError):
        EditOptions(solver="lanczos")


# ---------------------------------------------------------------- golden: fast == official

def _matrices(kind, m, n, seed):
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        return torch.randn(m, n, generator=g), 0.05 * torch.randn(m, n, generator=g)
    # structured: base with a decaying spectrum, delta = low rank + small noise
    r = min(m, n)
    Ub, _ = torch.linalg.qr(torch.randn(m, r, generator=g))
    Vb, _ = torch.linalg.qr(torch.randn(n, r, generator=g))
    W0 = Ub @ torch.diag(torch.logspace(0, -1.5, r)) @ Vb.T
    dW = 0.02 * torch.randn(m, 4, generator=g) @ torch.randn(4, n, generator=g) + 1e-4 * torch.randn(m, n, generator=g)
    return W0, dW


DELTA = ["0.1", "3", "energy:0.8"]
BASE = ["full", "0.5", "energy:0.9"]
MASKS = ["full", "diagonal", "off_diagonal"]
COMBOS = [(d, b, mk, "spectral") for d, b, mk in itertools.product(DELTA, BASE, MASKS)] + \
         [(d, "full", "full", "none") for d in DELTA]


@pytest.mark.parametrize("kind", ["random", "structured"])
@pytest.mark.parametrize("shape", [(40, 40), (60, 24), (24, 60)])
def test_golden_fast_equals_official_every_option(kind, shape):
    W0, dW = _matrices(kind, *shape, seed=zlib.crc32(f"{kind}{shape}".encode()) % 1000)  # not hash(): salted per process
    cache = BasisCache()
    worst = 0.0
    for d, b, mk, proj in COMBOS:
        opts = EditOptions(delta_rank=parse_rank(d), base_rank=parse_rank(b), mask=mk, projection=proj)
        fast, _ = _delta(W0, W0 + dW, opts, cache=cache)
        ref = official_sar_delta(W0, W0 + dW, opts.delta_rank, opts.base_rank, mk, proj)
        err = la.rel_err(fast, ref)
        worst = max(worst, err)
        assert err < 1e-4, (d, b, mk, proj, err)
    assert cache.hits > 0  # the base decomposition was reused across options


@pytest.mark.parametrize("shape", [(40, 40), (64, 40), (40, 64)])
def test_golden_randomized_solver_every_option_below_the_auto_threshold(shape, monkeypatch):
    """solver=randomized on matrices far below the auto threshold (256), every option combination:
    the subspace iteration itself runs (never its exact fallback, checked by a spy) and agrees with
    the official transcription. Structured deltas (rank 4 + 1e-4 noise) and delta ranks <= 4, where the
    spectral gap makes the randomized factors converge to the exact ones."""
    W0, dW = _matrices("structured", *shape, seed=zlib.crc32(f"rand{shape}".encode()) % 1000)
    calls = {"randomized": 0, "fallback": 0}
    real_rsvd, real_exact = la.randomized_svd, la.exact_svd

    def rsvd(*a, **k):
        calls["randomized"] += 1
        return real_rsvd(*a, **k)

    def exact(*a, **k):
        calls["fallback"] += 1
        return real_exact(*a, **k)

    monkeypatch.setattr(la, "randomized_svd", rsvd)
    monkeypatch.setattr(la, "exact_svd", exact)
    cache = BasisCache()
    for d, b, mk, proj in COMBOS:
        opts = EditOptions(delta_rank=parse_rank(d), base_rank=parse_rank(b), mask=mk, projection=proj,
                           solver="randomized")
        fast, e = _delta(W0, W0 + dW, opts, cache=cache)
        assert e.stats["k"] <= 4, (d, e.stats["k"])
        ref = official_sar_delta(W0, W0 + dW, opts.delta_rank, opts.base_rank, mk, proj)
        err = la.rel_err(fast, ref)
        assert err < 1e-4, (d, b, mk, proj, err)
    assert calls == {"randomized": len(COMBOS), "fallback": 0}


@pytest.mark.parametrize("d,b,mk", [("4", "full", "full"), ("0.015", "full", "full"), ("4", "0.5", "diagonal"),
                                    ("energy:0.99", "full", "off_diagonal"), ("4", "energy:0.9", "full")])
@pytest.mark.parametrize("shape", [(320, 160), (160, 320), (256, 256)])
def test_golden_randomized_solver_on_structured(d, b, mk, shape):
    W0, dW = _matrices("structured", *shape, seed=7)
    opts = EditOptions(delta_rank=parse_rank(d), base_rank=parse_rank(b), mask=mk, solver="randomized")
    fast, _ = _delta(W0, W0 + dW, opts)
    ref = official_sar_delta(W0, W0 + dW, opts.delta_rank, opts.base_rank, mk)
    assert la.rel_err(fast, ref) < 1e-4


def test_sweep_equals_individual_edits():
    W0, dW = _matrices("structured", 320, 160, seed=5)
    ranks = [parse_rank(s) for s in ("1", "2", "4")]
    opts = EditOptions(solver="randomized")
    sweep = sar_sweep_matrix(W0, W0 + dW, opts, ranks)
    for spec, e in zip(ranks, sweep):
        ref = official_sar_delta(W0, W0 + dW, spec)
        assert e.stats["k"] == int(spec.value)
        assert la.rel_err(e.B_mq @ e.A_qn, ref) < 1e-4


# ---------------------------------------------------------------- randomized SVD accuracy

@pytest.mark.parametrize("decay", [0.05, 0.1, 1.0])
def test_randomized_svd_energy_on_flat_and_decaying_spectra(decay):
    g = torch.Generator().manual_seed(11)
    n, k = 400, 8
    U, _ = torch.linalg.qr(torch.randn(n, n, generator=g))
    V, _ = torch.linalg.qr(torch.randn(n, n, generator=g))
    S = torch.arange(1, n + 1, dtype=torch.float32) ** (-decay)
    A = U @ torch.diag(S) @ V.T
    opt = float((S[:k] ** 2).sum())
    Ur, Sr, Vhr = la.randomized_svd(A, k)  # defaults: niter=16, oversample=10
    got = la.lowrank_fro2(Ur * Sr, Vhr)
    # stated accuracy: >= 99.5% of the optimal rank-k energy at S_i ~ i^-0.05, >= 99.9% from i^-0.1 on
    assert got / opt > (0.995 if decay < 0.1 else 0.999)
    Ur0, Sr0, Vhr0 = la.randomized_svd(A, k, niter=0)
    # and the power iterations are what buys it on the flat spectrum
    if decay < 0.5:
        assert la.lowrank_fro2(Ur0 * Sr0, Vhr0) / opt < got / opt
    torch.testing.assert_close(Sr, S[:k], rtol=2e-2 if decay < 0.5 else 1e-4, atol=0)


def test_randomized_svd_exact_on_low_rank():
    g = torch.Generator().manual_seed(12)
    A = torch.randn(300, 5, generator=g) @ torch.randn(5, 200, generator=g)
    U, S, Vh = la.randomized_svd(A, 5, niter=2)
    assert la.rel_err(U @ torch.diag(S) @ Vh, A) < 1e-5


def test_gram_singular_values_match_svd():
    A = torch.randn(90, 40, generator=torch.Generator().manual_seed(13))
    torch.testing.assert_close(la.singular_values_gram(A), torch.linalg.svdvals(A), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(la.singular_values_gram(A.T), torch.linalg.svdvals(A), rtol=1e-4, atol=1e-5)


def test_range_projector_equals_qr_projector():
    g = torch.Generator().manual_seed(14)
    W = torch.randn(80, 30, generator=g)
    X = torch.randn(80, 5, generator=g)
    basis = la.base_basis(W, RankSpec("full"))
    assert basis.kind == "range"
    Q, _ = torch.linalg.qr(W)
    assert la.rel_err(basis.project_left(X), Q @ (Q.T @ X)) < 1e-5
    Y = torch.randn(5, 80, generator=g)
    basis_t = la.base_basis(W.T.contiguous(), RankSpec("full"))
    assert la.rel_err(basis_t.project_right(Y), (Y @ Q) @ Q.T) < 1e-5


def test_lowrank_fro2_and_angles_hand_values():
    B = torch.tensor([[1.0], [2.0]])
    A = torch.tensor([[3.0, 0.0, 4.0]])
    assert la.lowrank_fro2(B, A) == pytest.approx(float(((B @ A) ** 2).sum()))
    e1 = torch.tensor([[1.0], [0.0]])
    d = torch.tensor([[1.0], [1.0]]) / 2 ** 0.5
    assert la.principal_angles_deg(e1, d).item() == pytest.approx(45.0, abs=1e-4)
