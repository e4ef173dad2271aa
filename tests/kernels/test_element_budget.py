"""Each floating element's budget is its own (correctness.element_scales, redteam8 h04): the absolute term is
``min(atol * max(sigma, 2^-7 * rms(row)), atol * rms(e)) + 2 * |e - e64| + tiny``: the sensitivity term never
exceeds the tensor-wide ``atol * rms(e)``; only the reference's own error can loosen an element beyond it.
``sigma`` is the element's sensitivity to rounding-sized relative moves of its inputs and weights, measured on the
float64 reference; it is what any order of fp32 rounding errs by. Hand-computed values, degenerate cases,
"vectorised == per-element loop", and a battery: honest alternative formulas (other summation orders, manual
softmax/log-softmax/LayerNorm/attention, tanh through exp) pass; dropped quiet rows, a one-pass variance on
shifted inputs, the tanh GELU for the erf one and fp32 for an fp64 problem fail."""

import math

import pytest
import torch
import torch.nn.functional as F

from shiftkit.kernels import correctness as C

D = C.SENSITIVITY_DELTA


def test_element_scales_hand_computed():
    r = torch.tensor([1.0, 0.5], dtype=torch.float64)
    e = torch.tensor([1.0, 0.5 + 2.0 ** -24], dtype=torch.float32)  # the fp32 reference errs by 2^-24 at [1]
    moved = [r + D * torch.tensor([3.0, 0.0], dtype=torch.float64), r + D * torch.tensor([-4.0, 0.0], dtype=torch.float64)]
    sumsq = C.add_tree(C.squared_change(r, moved[0]), C.squared_change(r, moved[1]))
    sig, err = C.element_scales(e, r, sumsq, 2)
    assert sig[0].item() == pytest.approx(math.sqrt((9 + 16) / 2), rel=1e-9)  # rms(3, 4) = 3.5355
    assert sig[1].item() == 0.0  # no move reaches it
    assert err.tolist() == [0.0, 2.0 ** -24]


def test_absolute_budget_hand_computed_and_never_looser_than_the_tensors():
    e = torch.tensor([[3.0, -4.0], [0.0, 0.0]])  # rms(e) = 2.5; rows: 3.5355 and 0
    scales = torch.stack([torch.tensor([[100.0, 1.0], [0.0, 2.0]], dtype=torch.float64),
                          torch.tensor([[0.0, 0.0], [0.0, 1e-6]], dtype=torch.float64)])
    got = C._absolute(e, 1e-4, scales)
    tiny = torch.finfo(torch.float32).tiny
    row0 = C.ROW_FLOOR * math.sqrt(12.5)
    want = [[min(1e-4 * 100.0, 1e-4 * 2.5) + tiny,  # sigma 100 > the tensor's rms: clamped to the tensor-wide 2.5e-4
             1e-4 * max(1.0, row0) + tiny],
            [tiny,  # a row of zeros that nothing moves: only the dtype's smallest normal
             1e-4 * 2.0 + 2 * 1e-6 + tiny]]
    assert got.flatten().tolist() == pytest.approx([v for row in want for v in row], rel=1e-12, abs=0)
    assert C._absolute(e, 1e-4, None) == pytest.approx(2.5e-4)  # no scales: the tensor-wide term


def test_degenerate_scales():
    e = torch.tensor([1.0, 2.0, 3.0])
    r = torch.tensor([1.0, math.inf, 3.0], dtype=torch.float64)
    sig, err = C.element_scales(e, r, None, 0)  # no moves: sensitivity 0; a non-finite reference: 0 (NaN/inf rules)
    assert sig.tolist() == [0.0, 0.0, 0.0] and err.tolist() == [0.0, 0.0, 0.0]
    over = torch.tensor([1.0, 2.0, math.inf], dtype=torch.float64)  # a move crossed an overflow at [2]
    r = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    sig, _ = C.element_scales(e, r, C.squared_change(r, over), 1)
    assert sig[2].item() == math.inf and sig[0].item() == 0.0
    assert C._absolute(e, 1e-4, torch.stack([sig, torch.zeros(3, dtype=torch.float64)]))[2] == pytest.approx(1e-4 * C.scale_of(e))
    z = torch.zeros(0)  # empty
    assert C.element_scales(z, z.double(), C.squared_change(z.double(), z.double()), 1).shape == (2, 0)
    assert C.squared_change(torch.tensor([1, 2]), torch.tensor([1, 3])) is None  # integer outputs: exact, no scales
    assert C.row_rms(torch.tensor(-2.0)).item() == 2.0  # 0-d: its own row


def test_mismatches_with_scales_equals_a_per_element_loop():
    g = torch.Generator().manual_seed(0)
    e = torch.randn(6, 5, generator=g) * torch.exp(3 * torch.randn(6, 1, generator=g))
    a = e + 4e-4 * torch.randn(6, 5, generator=g) * e.abs()
    scales = torch.stack([torch.rand(6, 5, generator=g, dtype=torch.float64) * 10,
                          torch.rand(6, 5, generator=g, dtype=torch.float64) * 1e-5])
    atol, rtol = 1e-4, 1e-4
    bad, _ = C.mismatches(e, a, atol, rtol, scales)
    rms_t = math.sqrt(sum(float(v) ** 2 for v in e.flatten()) / e.numel())
    tiny = torch.finfo(torch.float32).tiny
    want = 0
    for i in range(6):
        rr = math.sqrt(sum(float(v) ** 2 for v in e[i]) / 5)
        for j in range(5):
            own = min(atol * max(float(scales[0, i, j]), C.ROW_FLOOR * rr), atol * rms_t) + 2 * float(scales[1, i, j]) + tiny
            want += abs(float(a[i, j]) - float(e[i, j])) > own + rtol * abs(float(e[i, j]))
    assert bad == want and 0 < bad < 30  # the case exercises both sides


def test_moved_relative_is_seeded_and_moves_floats_only():
    x = [torch.tensor([1.0, -2.0, 0.0], dtype=torch.float64), torch.tensor([3, 4]), 2.5,
         torch.tensor([1 + 1j], dtype=torch.complex128)]
    a = C.moved_relative(x, torch.Generator().manual_seed(5))
    b = C.moved_relative(x, torch.Generator().manual_seed(5))
    assert all(torch.equal(u, v) for u, v in zip(a[:2] + a[3:], b[:2] + b[3:]))
    assert torch.equal(a[1], x[1]) and a[2] == 2.5  # integers and Python numbers untouched
    assert a[0][2].item() == 0.0  # relative: a zero stays zero
    rel = ((a[0][:2] - x[0][:2]) / x[0][:2]).abs()
    assert bool((rel > 0).all()) and bool((rel < 10 * D).all())
    assert 0 < abs(complex(a[3][0]) / (1 + 1j) - 1) < 10 * D


# ---------------------------------------------------------------------------- the battery, through scales_tree


def _scales(f, xs, e):
    """As the harness does (evaluate._Evaluation._scales): the float64 reference and k moved runs of it."""
    x64 = [x.double() if x.is_floating_point() else x for x in xs]
    g = torch.Generator().manual_seed(1)
    e64, sumsq = f(*x64), None
    for _ in range(C.SENSITIVITY_DRAWS):
        sumsq = C.add_tree(sumsq, C.squared_change(e64, f(*C.moved_relative(x64, g))))
    return C.scales_tree(e, e64, sumsq, C.SENSITIVITY_DRAWS)


def _verdict(f, alt, xs, per_element=True):
    e = f(*xs)
    code, _, _ = C.compare(e, alt(*xs), scales=_scales(f, xs, e) if per_element else None)
    return code


def _seq(t, dim=-1):
    return t.cumsum(dim).select(dim, -1)  # a sequential fp32 accumulation: another honest summation order


def _battery():
    g = torch.Generator().manual_seed(0)
    rn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    W, b = rn(128, 128) / 11, rn(128) / 11
    tokens = rn(256, 128) * torch.exp(4 * rn(256, 1))  # per-token scales over many decades (redteam8 p4)

    def quiet_rows(x, W, b):  # redteam8 h04
        out = x @ W.T + b
        out[x.abs().amax(1) < 2.0 ** -26 * x.abs().max()] = b
        return out

    def log_softmax(x):
        m = x.max(-1, keepdim=True).values
        return x - m - (x - m).exp().sum(-1, keepdim=True).log()

    def ln_two_pass(x):
        m = _seq(x) / x.shape[-1]
        d = x - m[:, None]
        return d / torch.sqrt(_seq(d * d) / x.shape[-1] + 1e-5)[:, None]

    def ln_one_pass(x):
        n = x.shape[-1]
        m = _seq(x) / n
        return (x - m[:, None]) / torch.sqrt((_seq(x * x) / n - m * m).clamp(min=0) + 1e-5)[:, None]

    def attn(q, k, v):
        return torch.softmax(q @ k.transpose(1, 2) / 8, -1) @ v

    def attn_seq(q, k, v):
        return _seq(_seq(q.unsqueeze(2) * k.unsqueeze(1)).div(8).softmax(-1).unsqueeze(-1) * v.unsqueeze(1), 2)

    lin = lambda x, W, b: x @ W.T + b  # noqa: E731
    honest = {
        "linear, sequential sum": (lin, lambda x, W, b: _seq(x.unsqueeze(1) * W.unsqueeze(0)) + b, [rn(64, 128), W, b]),
        "per-token scales, every row": (lin, lambda x, W, b: _seq(x.unsqueeze(1) * W.unsqueeze(0)) + b, [tokens, W, b]),
        "log-softmax, m + lse": (lambda x: torch.log_softmax(x, -1), log_softmax, [rn(64, 512) * 24]),
        "softmax, sequential sum": (lambda x: torch.softmax(x, -1), lambda x: (x - x.amax(-1, True)).exp() /
                                    _seq((x - x.amax(-1, True)).exp())[:, None], [rn(64, 512) * 3]),
        "LayerNorm two-pass, shifted": (lambda x: F.layer_norm(x, (512,)), ln_two_pass, [rn(64, 512) + 32]),
        "tanh as 1 - 2/(exp(2x)+1)": (torch.tanh, lambda x: 1 - 2 / (torch.exp(2 * x) + 1), [rn(256, 256)]),
        "GELU erf, by hand": (F.gelu, lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))), [rn(256, 256) * 3]),
        "attention, sequential": (attn, attn_seq, [rn(4, 64, 32), rn(4, 64, 32), rn(4, 64, 32)]),
        "x - mean, shifted": (lambda x: x - x.mean(-1, keepdim=True),
                              lambda x: x - (_seq(x) / x.shape[-1])[:, None], [rn(64, 1024) + 100]),
        "row sums, keepdim": (lambda x: x.sum(-1, keepdim=True), lambda x: _seq(x)[:, None], [rn(64, 4096)]),
        "1 - sigmoid, more accurate than the reference": (lambda x: 1 - torch.sigmoid(x), lambda x: torch.sigmoid(-x),
                                                          [rn(4096) * 10]),
        "1 - sigmoid near 1, where the reference rounds": (lambda x: 1 - torch.sigmoid(x), lambda x: torch.sigmoid(-x),
                                                             [rn(64, 256).abs() + 12]),
        "complex magnitude softmax": (lambda z: torch.softmax(z.abs(), -1), lambda z: (z.abs() - z.abs().amax(-1, True)).exp()
                                      / _seq((z.abs() - z.abs().amax(-1, True)).exp())[:, None],
                                      [torch.complex(rn(64, 512), rn(64, 512)) * 4]),
        "fp16 RMSNorm in fp32": (lambda x: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, True) + 1e-6)).half(),
                                 lambda x: (x.float() * torch.rsqrt(_seq(x.float() ** 2)[:, None] / 512 + 1e-6)).half(),
                                 [rn(64, 512).half()]),
    }
    wrong = {
        "quiet rows dropped (redteam8 h04)": (lin, quiet_rows, [tokens, W, b]),
        "one-pass variance, shifted": (lambda x: F.layer_norm(x, (512,)), ln_one_pass, [rn(64, 512) + 64]),
        "tanh GELU for the erf one": (F.gelu, lambda x: F.gelu(x, approximate="tanh"), [rn(4096)]),
        "an fp64 problem in fp32": (torch.exp, lambda x: x.float().exp().double(), [rn(4096).double()]),
    }
    return honest, wrong


HONEST, WRONG = _battery()


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_formulas_pass_each_elements_budget(name):
    f, alt, xs = HONEST[name]
    assert _verdict(f, alt, xs) is None


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_kernels_fail_each_elements_budget(name):
    f, alt, xs = WRONG[name]
    assert _verdict(f, alt, xs) == "output_mismatch"


def test_the_tensor_wide_budget_alone_passed_the_quiet_rows():
    """The class this closes: under ``atol * rms(e)`` alone the dropped rows pass (the reason for the change)."""
    f, alt, xs = WRONG["quiet rows dropped (redteam8 h04)"]
    assert _verdict(f, alt, xs, per_element=False) is None


# ---------------------------------------------------------------------------- optimized == reference


def _ref_scale_of(t):
    """The plain form (before the one-pass norm): the float64 copy, its finite values, their rms."""
    x = t.detach()
    x = (x.abs() if x.is_complex() else x).double()
    x = x[torch.isfinite(x)]
    return float(x.pow(2).mean().sqrt()) if x.numel() else 0.0


def _ref_row_rms(e):
    x = e.detach()
    x = (x.abs() if x.is_complex() else x).double()
    if x.dim() == 0:
        x = x.reshape(1)
    fin = torch.isfinite(x)
    sq = torch.where(fin, x * x, torch.zeros_like(x))
    r = (sq.sum(-1, keepdim=True) / fin.sum(-1, keepdim=True).clamp(min=1)).sqrt()
    return r.expand_as(x).reshape(e.shape)


def _ref_mismatches(expected, actual, atol, rtol, scales=None):
    """The plain, element-by-element rules: the budget, NaN only matches NaN, an infinity only itself."""
    wide = torch.complex128 if expected.is_complex() else torch.float64
    e, a = expected.detach().to(wide), actual.detach().to(wide)
    if scales is None:
        absolute = atol * _ref_scale_of(expected)
    else:
        tiny = torch.finfo({torch.complex64: torch.float32, torch.complex128: torch.float64}.get(expected.dtype, expected.dtype)).tiny
        own = torch.maximum(_ref_row_rms(expected) * C.ROW_FLOOR, scales[0]) * atol
        absolute = own.clamp(max=atol * _ref_scale_of(expected)) + C.REFERENCE_ERROR_FACTOR * scales[1] + tiny
    diff = (a - e).abs()
    finite_e = torch.isfinite(e.real) & torch.isfinite(e.imag) if e.is_complex() else torch.isfinite(e)
    nan = (lambda z: torch.isnan(z.real) | torch.isnan(z.imag)) if e.is_complex() else torch.isnan
    ok = ((diff <= absolute + rtol * e.abs()) & finite_e) | (a == e)
    ok = (ok & ~(nan(e) ^ nan(a))) | (nan(e) & nan(a))
    bad = int((~ok).sum())
    fin = diff[torch.isfinite(diff)]
    top = float(fin.max()) if fin.numel() else (0.0 if not bad else math.inf)
    return bad, (math.inf if bad and top == 0.0 else top)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                                   torch.complex64])
@pytest.mark.parametrize("special", [False, True])
def test_optimized_comparison_equals_the_plain_rules(dtype, special):
    """mismatches / scale_of / row_rms (one-pass norms, no float64 copies of the row rms, a max that doubles
    as the finiteness test) give the plain rules' counts and max diff, on finite outputs and with NaN and
    infinities in either tensor, with and without element scales, 0-d and one-row shapes too."""
    g = torch.Generator().manual_seed(3)
    for shape in [(7, 33), (1, 40), (50,), ()]:
        for trial in range(4):
            e = (torch.randn(shape, generator=g, dtype=torch.float64) * 10.0 ** (trial - 2))
            if dtype.is_complex:
                e = torch.complex(e, torch.randn(shape, generator=g, dtype=torch.float64))
            e = e.to(dtype)
            noise = torch.randn(shape, generator=g, dtype=torch.float64) * (1e-5, 1e-4, 3e-4, 1e-3)[trial]
            a = (e.to(torch.complex128 if dtype.is_complex else torch.float64) * (1 + noise)).to(dtype)
            if special and e.numel() > 4:
                ef, af = e.view(-1), a.view(-1)
                ef[0], af[0] = math.inf, math.inf  # equal infinities
                ef[1], af[1] = math.nan, math.nan  # NaN matches NaN
                af[2] = math.nan  # a NaN where a number is expected
                ef[3] = -math.inf  # an infinity expected, a number given
            sc = torch.stack([torch.rand(shape, generator=g, dtype=torch.float64) * 3,
                              torch.rand(shape, generator=g, dtype=torch.float64) * 1e-6])
            for scales in (None, sc):
                got = C.mismatches(e, a, 1e-4, 1e-4, scales)
                want = _ref_mismatches(e, a, 1e-4, 1e-4, scales)
                assert got[0] == want[0], (shape, trial, scales is None, got, want)
                assert got[1] == pytest.approx(want[1], rel=1e-12), (shape, trial, got, want)
            assert C.scale_of(e) == pytest.approx(_ref_scale_of(e), rel=1e-12)
            assert torch.allclose(C.row_rms(e), _ref_row_rms(e), rtol=1e-12, atol=0)
