"""Domain classes of the correctness protocol, at the plan level (no workers): the reference's state and
inputs are varied wherever the reference stays well defined (docs/kernels.md, issue redteam4)."""

import importlib
from pathlib import Path

import torch

from shiftkit.kernels import EvalConfig, load_problem, load_solution

E = importlib.import_module("shiftkit.kernels.evaluate")
ADV = Path(__file__).parent.parent / "adversarial"
ANY_SOLUTION = ADV / "honest" / "cpp_scan.py"


def _ev(prob: Path, secret: int = 3):
    p = load_problem(prob)
    return E._Evaluation(p, load_solution(ANY_SOLUTION), EvalConfig(secret_seed=secret), E.Result(p.name, "x"))


def _write(tmp_path, name: str, body: str) -> Path:
    f = tmp_path / f"{name}.py"
    f.write_text("import torch\nimport torch.nn as nn\n\n\n" + body)
    return f


def test_batchnorm_running_statistics_are_perturbed():
    """redteam4 h03: running_mean 0 and running_var 1 at init under every seed; the reference's are moved (the
    variance multiplicatively, so it stays positive), and the same state dict is what every party loads."""
    sd = _ev(ADV / "problems" / "bn_eval.py").model.state_dict()
    assert float(sd["bn.running_mean"].abs().mean()) > 0.1
    assert float((sd["bn.running_var"] - 1).abs().mean()) > 0.1 and bool((sd["bn.running_var"] > 0).all())
    assert int(sd["bn.num_batches_tracked"]) in (0, 1)  # an integer buffer is varied too (``above`` of a constant 0)


def test_non_persistent_buffers_are_not_moved(tmp_path):
    """A buffer outside the state dict never reaches the candidate, so the reference keeps it as built."""
    prob = _write(tmp_path, "np_buf", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.register_buffer('s', torch.full((64,), 2.0), persistent=False)\n"
                  "        self.register_buffer('t', torch.full((64,), 2.0))\n\n"
                  "    def forward(self, x):\n        return x * self.s + self.t\n\n\n"
                  "def get_inputs():\n    return [torch.randn(8, 64)]\n\n\ndef get_init_inputs():\n    return []\n")
    m = _ev(prob).model
    assert torch.equal(m.s, torch.full((64,), 2.0)) and not torch.equal(m.t, torch.full((64,), 2.0))


def test_perturbed_buffers_are_refused_where_the_reference_turns_non_finite(tmp_path):
    """An all-zero buffer under a square root: the additive move makes entries negative (NaN output), so the
    buffers keep their seeded init exactly, while the parameters (admitted on their own) are still moved."""
    prob = _write(tmp_path, "sqrt_buf", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.register_buffer('acc', torch.zeros(256))\n        self.g = nn.Parameter(torch.ones(256))\n\n"
                  "    def forward(self, x):\n        return x * torch.sqrt(self.acc) + self.g\n\n\n"
                  "def get_inputs():\n    return [torch.randn(8, 256)]\n\n\ndef get_init_inputs():\n    return []\n")
    sd = _ev(prob).model.state_dict()
    assert torch.equal(sd["acc"], torch.zeros(256)) and not torch.equal(sd["g"], torch.ones(256))


# ----------------------------------------------------------------------------- integer and bool inputs

from shiftkit.kernels import correctness as C  # noqa: E402


def test_redraw_bool_density_row_and_shuffle_hand_computed():
    tril = torch.tril(torch.ones(64, 64, dtype=torch.bool))  # density 2080 / 4096
    d = C.redraw_tensor(tril, "density", 1)
    g = torch.Generator().manual_seed(1)  # hand-computed: one uniform per element, True below the density
    assert torch.equal(d, torch.rand(tril.shape, generator=g, dtype=torch.float64) < 2080 / 4096)
    assert d.dtype == torch.bool and not torch.equal(d, tril)
    assert bool((d & ~tril).any())  # Trues after a False: no prefix/causal structure survives
    eye = torch.eye(64, dtype=torch.bool)
    r = C.redraw_tensor(eye, "row", 2)  # density 1/64: plain redraws leave rows empty; "row" never does
    assert bool(r.any(dim=-1).all()) and not bool(C.redraw_tensor(eye, "density", 2).any(dim=-1).all())
    s = C.redraw_tensor(tril, "shuffle", 3)
    assert torch.equal(s.sum(-1), tril.sum(-1)) and not torch.equal(s, tril)  # rows keep their count of Trues
    assert torch.equal(C.redraw_tensor(torch.zeros(5, dtype=torch.bool), "density", 1), torch.zeros(5, dtype=torch.bool))
    assert C.redraw_tensor(torch.zeros(0, 3, dtype=torch.bool), "row", 1).shape == (0, 3)  # degenerate


def test_redraw_integers_range_sorted_and_shuffle_hand_computed():
    x = torch.tensor([[3, 9, 5], [7, 4, 6]])
    r = C.redraw_tensor(x, "range", 4)
    g = torch.Generator().manual_seed(4)  # hand-computed: 3 + floor(u * 7) within [min, max] = [3, 9]
    assert torch.equal(r, 3 + (torch.rand(x.shape, generator=g, dtype=torch.float64) * 7).floor().long())
    off = torch.arange(0, 64, 8)  # EmbeddingBag offsets: non-decreasing, first 0
    o = C.redraw_tensor(off, "range", 5)
    assert int(o[0]) == 0 and bool((o[1:] >= o[:-1]).all()) and int(o.max()) <= 56 and not torch.equal(o, off)
    rows = torch.tensor([[2, 5, 5, 8], [4, 4, 6, 9]])  # sorted rows: each starts at its own first element
    rr = C.redraw_tensor(rows, "range", 6)
    assert torch.equal(rr[:, 0], rows[:, 0]) and bool((rr[:, 1:] >= rr[:, :-1]).all())
    col = torch.tensor([[4], [1], [7]])  # a last dim of 1 is not "sorted": a plain redraw
    assert not torch.equal(C.redraw_tensor(col, "range", 1), col)
    b = torch.tensor([[-3, 1, 2, 7]], dtype=torch.int32)
    sb = C.redraw_tensor(b, "shuffle", 2)
    assert sb.dtype == torch.int32 and sorted(sb[0].tolist()) == [-3, 1, 2, 7]  # no zero divisor appears
    u8 = torch.tensor([0, 255], dtype=torch.uint8)
    assert C.redraw_tensor(u8, "range", 1).dtype == torch.uint8
    assert torch.equal(C.redraw_tensor(torch.full((4,), 7), "range", 1), torch.full((4,), 7))  # degenerate: one value


def test_redraw_int64_far_hand_computed():
    """Beyond 2^53 with per-element random low 32 bits: neither an fp64 nor a low-word computation survives."""
    x = torch.tensor([-5, 0, 7, 1 << 20])
    f = C.redraw_tensor(x, "far", 3)
    g = torch.Generator().manual_seed(3)
    r = torch.randint(0, 2**32, x.shape, generator=g, dtype=torch.int64)
    s = 1 if int(torch.randint(0, 2, (1,), generator=g)) else -1
    assert torch.equal(f, x + s * (2**53 + r))
    assert bool((f.abs() >= 2**53 - 2**20).all())
    for k in range(8):  # either sign: beyond 2^53 in magnitude (fp64 cannot hold every value)
        fk = C.redraw_tensor(torch.arange(-32, 32) * 1000, "far", k)
        assert bool((fk.abs() > 2**53 - 2**20).all()) and bool((fk.double().long() != fk).any())
    assert bool((f.double().long() != f).any())  # not all held exactly by fp64
    low = f.to(torch.int32)  # low words: their order is not the values' order on some draw
    assert any(not torch.equal(C.redraw_tensor(x, "far", k).to(torch.int32).argsort(),
                               C.redraw_tensor(x, "far", k).argsort()) for k in range(20)), low
    edge = torch.tensor([2**63 - 1, -2**63])  # no room either way: unchanged (degenerate)
    assert torch.equal(C.redraw_tensor(edge, "far", 1), edge)
    assert torch.equal(C.redraw_tensor(torch.tensor([1, 2], dtype=torch.int32), "far", 1), torch.tensor([1, 2], dtype=torch.int32))


def test_redraw_variant_order_follows_the_values():
    assert C.redraw_variants(torch.ones(3, dtype=torch.bool)) == ("density", "row", "shuffle")
    assert C.redraw_variants(torch.tensor([3, 1, 3, 2])) == ("range", "shuffle", "below", "above")  # repeats: a fresh draw first
    assert C.redraw_variants(torch.tensor([3, 0, 2, 1])) == ("shuffle", "range", "below", "above")  # a permutation stays one
    assert C.redraw_variants(torch.tensor([0, 1, 2, 3])) == ("range", "shuffle", "below", "above")  # sorted: redrawn sorted
    assert C.redraw_variants(torch.tensor([5])) == ("range", "shuffle", "below", "above")


def test_a_constant_count_is_drawn_below_it():
    """redteam8 h09: every length the full length (a constant int input) was never varied, so a kernel ignoring
    the lengths passed; ``below`` draws a constant c >= 2 in [1, c]; range and shuffle leave it as it is."""
    full = torch.full((64,), 512, dtype=torch.int64)
    d = C.redraw_tensor(full, "below", 3)
    assert d.dtype == torch.int64 and int(d.min()) >= 1 and int(d.max()) <= 512 and len(torch.unique(d)) > 32
    assert torch.equal(C.redraw_tensor(full, "range", 3), full) and torch.equal(C.redraw_tensor(full, "shuffle", 3), full)
    assert torch.equal(C.redraw_tensor(torch.tensor([3, 1, 2]), "below", 3), torch.tensor([3, 1, 2]))  # not constant
    one = torch.ones(4, dtype=torch.int32)
    assert torch.equal(C.redraw_tensor(one, "below", 3), one)  # c = 1: nothing below to draw (degenerate)
    assert torch.equal(C.redraw_tensor(torch.full((2,), 2), "below", 0).clamp(1, 2), C.redraw_tensor(torch.full((2,), 2), "below", 0))


def test_a_constant_index_is_drawn_above_it():
    """redteam12 h02: token types all 0 (a constant integer input below 2) were never varied, so a kernel ignoring
    them passed; ``above`` draws a constant c >= 0 element by element in {c, c + 1}; not a constant, a negative
    constant or the dtype's maximum: as it is."""
    z = torch.zeros(4, 64, dtype=torch.int64)
    d = C.redraw_tensor(z, "above", 5)
    assert d.dtype == torch.int64 and set(torch.unique(d).tolist()) == {0, 1}
    assert set(torch.unique(C.redraw_tensor(torch.full((64,), 7, dtype=torch.int32), "above", 5)).tolist()) == {7, 8}
    assert torch.equal(C.redraw_tensor(torch.tensor([0, 1]), "above", 5), torch.tensor([0, 1]))  # not constant
    assert torch.equal(C.redraw_tensor(torch.full((3,), -1), "above", 5), torch.full((3,), -1))  # negative: a sentinel
    top = torch.full((3,), 127, dtype=torch.int8)
    assert torch.equal(C.redraw_tensor(top, "above", 5), top)  # degenerate: no value above in the dtype
    assert torch.equal(C.redraw_tensor(z, "above", 5), d)  # seeded


def test_redraw_targets_one_tensor_and_is_pure():
    xs = [torch.randn(3), [torch.tensor([1, 2, 9])], torch.tensor([True, False, True, False])]
    assert C.discrete_targets(xs) == [1, 2]
    a = C.redraw(xs, 2, "density", 7)
    assert a[0] is xs[0] and a[1][0] is xs[1][0] and a[2].dtype == torch.bool
    assert torch.equal(a[2], C.redraw(xs, 2, "density", 7)[2])  # pure in the seed
    assert C.discrete_targets([torch.zeros(0, dtype=torch.long), 3]) == []


def _plan(prob: Path):
    ev = _ev(prob)
    return ev, [r["where"] for r in ev.plan()]


def test_plan_varies_every_integer_and_bool_input_within_the_reference_domain(tmp_path):
    """redteam4 h09/h11/h12/h06/h13: each discrete input varied on its own by the first admissible variant; a
    variant on which the reference raises (an index out of range) or turns non-finite (an all-masked row) is
    dropped, and the next one tried."""
    probs = ADV / "problems"
    ev, where = _plan(probs / "embbag_offsets.py")
    assert "redraw range of input tensor 1 inputs" in where and "redraw range of input tensor 0 inputs" in where
    assert not any("far" in w for w in where)  # indices and offsets beyond 2^53: EmbeddingBag raises, dropped
    assert ("redraw", (1, "range")) in ev.spot_kinds
    _, where = _plan(probs / "masked_softmax_bool.py")
    assert "redraw density of input tensor 1 inputs" in where
    _, where = _plan(probs / "rowmax_int64.py")
    assert {"redraw range of input tensor 0 inputs", "redraw far of input tensor 0 inputs"} <= set(where)
    eye = _write(tmp_path, "eye_mask", "class Model(nn.Module):\n    def forward(self, s, m):\n"
                 "        return s.masked_fill(~m, float('-inf')).softmax(-1)\n\n\n"
                 "def get_inputs():\n    return [torch.randn(2, 64, 64), torch.eye(64, dtype=torch.bool)]\n\n\n"
                 "def get_init_inputs():\n    return []\n")
    _, where = _plan(eye)  # density 1/64: a plain redraw leaves a row all False (NaN): a True in every row instead
    assert "redraw row of input tensor 1 inputs" in where and "redraw density of input tensor 1 inputs" not in where
    div = _write(tmp_path, "int_div", "class Model(nn.Module):\n    def forward(self, a, b):\n"
                 "        return torch.div(a, b, rounding_mode='floor')\n\n\n"
                 "def get_inputs():\n    return [torch.randint(-1000, 1000, (64, 64)), torch.randint(1, 9, (64, 64)) * "
                 "(torch.randint(0, 2, (64, 64)) * 2 - 1)]\n\n\ndef get_init_inputs():\n    return []\n")
    _, where = _plan(div)  # divisors in [-8, 8] include 0 once redrawn: integer division raises; rows permuted instead
    assert "redraw shuffle of input tensor 1 inputs" in where and "redraw range of input tensor 1 inputs" not in where


def test_redraw_full_range_and_empty_rows_hand_computed():
    """redteam5 h05/h09: ``full`` draws a narrower integer over its dtype's whole range (hand-computed from the
    generator); ``empty`` sets one row in EDGE_ROWS all False and as many all True, ``dense`` the True rows only;
    a constant tensor is left as it is."""
    x = torch.randint(-1000, 1000, (4, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    f = C.redraw_tensor(x, "full", 5)
    g = torch.Generator().manual_seed(5)
    want = torch.randint(-2**31, 2**31, (4, 64), generator=g, dtype=torch.int64).to(torch.int32)
    assert f.dtype == torch.int32 and torch.equal(f, want)
    assert int(f.to(torch.int64).abs().max()) > 2**30  # far beyond what [-1000, 1000) partial sums reach
    s = C.redraw_tensor(torch.arange(0, 64, dtype=torch.int16).reshape(1, 64), "full", 2)
    assert bool((s[..., 1:] >= s[..., :-1]).all()) and int(s.to(torch.int64).abs().max()) > 2**10  # sorted stays sorted
    u = C.redraw_tensor(torch.tensor([1, 2, 3], dtype=torch.uint8), "full", 1)
    assert u.dtype == torch.uint8
    const = torch.full((8,), 7, dtype=torch.int32)
    assert C.redraw_tensor(const, "full", 1) is const
    big = torch.tensor([1, 2], dtype=torch.int64)
    assert C.redraw_tensor(big, "full", 1) is big  # int64 gets ``far``, not ``full``
    m = torch.rand(64, 32, generator=torch.Generator().manual_seed(1)) < 0.5
    e = C.redraw_tensor(m, "empty", 3)
    d = C.redraw_tensor(m, "dense", 3)
    k = 64 // C.EDGE_ROWS
    assert int((~e.any(-1)).sum()) >= k and int(e.all(-1).sum()) >= k
    assert int((~d.any(-1)).sum()) == 0 and int(d.all(-1).sum()) >= k  # ``dense``: no row without a True
    g = torch.Generator().manual_seed(3)  # hand-computed: the density draw, then the rows, from one generator
    base = torch.rand(m.shape, generator=g, dtype=torch.float64) < float(m.double().mean())
    order = torch.randperm(64, generator=g)
    base[order[:k]] = False
    base[order[k:2 * k]] = True
    assert torch.equal(e, base)
    assert torch.equal(C.redraw_tensor(torch.tensor([True, False, True]), "empty", 1), torch.zeros(3, dtype=torch.bool))
    ones = torch.ones(16, 4, dtype=torch.bool)  # redteam6 h08: a constant mask is varied too, at density 1/2
    e1 = C.redraw_tensor(ones, "empty", 1)
    assert int((~e1.any(-1)).sum()) >= 2 and 0.2 < float(e1.double().mean()) < 0.8
    d1 = C.redraw_tensor(ones, "dense", 1)
    assert bool(d1.any(-1).all()) and not bool(d1.all())  # a True in every row, and holes
    assert C.extra_variants(m) == (("empty", "dense"),) and C.extra_variants(x) == (("full",),)
    assert C.extra_variants(big) == (("far",),)


def test_plan_reaches_the_output_width_and_empty_rows(tmp_path):
    """The plan admits ``full`` for an int32 -> int64 scan and ``empty`` for a masked argmax (all-False rows
    have a defined output), and falls back to ``dense`` where an all-False row has none (a masked softmax)."""
    cs = _write(tmp_path, "i32_cumsum", "class Model(nn.Module):\n    def forward(self, x):\n"
                "        return torch.cumsum(x, 1)\n\n\n"
                "def get_inputs():\n    return [torch.randint(-1000, 1000, (8, 256), dtype=torch.int32)]\n\n\n"
                "def get_init_inputs():\n    return []\n")
    ev, where = _plan(cs)
    assert "redraw full of input tensor 0 inputs" in where and ("redraw", (0, "full")) in ev.spot_kinds
    r = [r for r in ev.plan() if r["where"] == "redraw full of input tensor 0 inputs"][0]
    assert int(r["expected"].abs().max()) > 2**31  # an int32 accumulator overflows on this round
    am = _write(tmp_path, "masked_argmax", "class Model(nn.Module):\n    def forward(self, x, m):\n"
                "        return x.masked_fill(~m, float('-inf')).argmax(-1)\n\n\n"
                "def get_inputs():\n    return [torch.randn(64, 64), torch.rand(64, 64) < 0.5]\n\n\n"
                "def get_init_inputs():\n    return []\n")
    _, where = _plan(am)
    assert "redraw empty of input tensor 1 inputs" in where
    _, where = _plan(ADV / "problems" / "masked_softmax_bool.py")
    assert "redraw dense of input tensor 1 inputs" in where and "redraw empty of input tensor 1 inputs" not in where


def test_perturbation_is_admitted_per_tensor_when_the_group_is_refused():
    """redteam6 h02: a gain under a square root refuses the additive move (negative entries, NaN), which kept
    every parameter at its init (LayerNorm's 1 and 0 too); each tensor is now admitted on its own, by the
    group's rule or the sign-preserving one, so the LayerNorm moves additively and the gain multiplicatively."""
    sd = _ev(ADV / "problems" / "ln_sqrt_gain.py").model.state_dict()
    assert float((sd["ln.weight"] - 1).abs().mean()) > 0.1 and float(sd["ln.bias"].abs().mean()) > 0.1
    g = sd["gain"]
    assert bool((g > 0).all()) and float((g - 1).abs().mean()) > 0.1  # moved, and still under the square root


def test_per_tensor_admission_costs_log_n_reference_calls(tmp_path, monkeypatch):
    """64 parameters and one gain under a square root (1024 entries: an additive move makes one negative under
    any secret): the refused group is split by halves, so the admission
    runs the reference O(log n) times (one tensor at a time would run it 65 times), and every tensor still
    moves: the 64 additively, the gain by the sign-preserving rule."""
    prob = _write(tmp_path, "many_params", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.ws = nn.ParameterList([nn.Parameter(torch.ones(32)) for _ in range(64)])\n"
                  "        self.gain = nn.Parameter(torch.ones(1024))\n\n"
                  "    def forward(self, x):\n        for w in self.ws:\n            x = x * w\n"
                  "        return x * torch.sqrt(self.gain - 0.01).mean()\n\n\n"
                  "def get_inputs():\n    return [torch.randn(8, 32)]\n\n\ndef get_init_inputs():\n    return []\n")
    calls = []
    real = C.finite_where
    monkeypatch.setattr(C, "finite_where", lambda *a: calls.append(1) or real(*a))
    sd = _ev(prob).model.state_dict()
    assert 2 <= len(calls) <= 2 + 2 * 7 + 1, len(calls)  # the group, 2 per level of a 65-leaf bisection, the gain
    assert all(float((sd[f"ws.{i}"] - 1).abs().mean()) > 0.1 for i in range(64))
    assert bool((sd["gain"] > 0).all()) and float((sd["gain"] - 1).abs().mean()) > 0.1


def test_a_parameter_bounded_on_both_sides_moves_by_a_smaller_step(tmp_path):
    """redteam7 h04: ``a * x + sqrt(1 - a^2) * h`` with a = 0.9: the additive and the sign-preserving moves both take
    some channel past 1 (NaN), so `a` kept its init and a kernel assuming 0.9 passed; the same draw shrunk (by 2 up
    to 64) moves it by a few percent, inside the domain, far past any tolerance."""
    prob = _write(tmp_path, "vp_mix", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.a = nn.Parameter(torch.full((256,), 0.9))\n\n"
                  "    def forward(self, x, h):\n        return self.a * x + torch.sqrt(1 - self.a ** 2) * h\n\n\n"
                  "def get_inputs():\n    return [torch.randn(8, 256), torch.randn(8, 256)]\n\n\n"
                  "def get_init_inputs():\n    return []\n")
    for secret in (3, 4, 5):
        a = _ev(prob, secret).model.state_dict()["a"]
        assert bool((a.abs() <= 1).all()), secret  # inside the domain
        assert float((a - 0.9).abs().mean()) > 1e-3 and float((a - 0.9).abs().max()) < 0.2, (secret, a)


def test_rescale_scalar_hand_computed_and_degenerate():
    import random

    rng = random.Random(7)
    u = rng.uniform(0.25, 1.0) * rng.choice((-1.0, 1.0))
    x = [torch.ones(2), 0.5, {"eps": 0.0, "n": 3, "flag": True}]
    assert C.scalar_targets(x) == [0, 1]  # floats only: not the int, not the bool
    y = C.rescale_scalar(x, 0, 7)
    assert y[1] == 0.5 * 2.0 ** u and y[2] == x[2] and y[0] is x[0]
    assert C.rescale_scalar(x, 1, 7, 0.5)[2]["eps"] == 0.5 * u  # zero moves to the fraction of u itself
    assert C.scalar_targets([torch.ones(1), 3, True]) == []  # degenerate: nothing to move


def test_python_float_inputs_get_a_round_of_their_own():
    """redteam7 h08: a temperature passed to forward as a Python float was never varied, so a kernel baking in the
    value passed; each float input is moved by 2^(+-u) from the secret in a round of its own (a spot kind too), and
    far each way, by 2^(+-7..8), in a round each where the reference is defined (redteam9 h12)."""
    ev, where = _plan(ADV / "problems" / "smooth_max_tau.py")
    r = [r for r in ev.plan() if r["kind"] == "scalar"]
    assert [x["where"] for x in r] == ["scalar 0 moved inputs", "scalar 0 moved far up inputs",
                                       "scalar 0 moved far down inputs"], where
    assert r[0]["inputs"][1] != 0.5 and torch.equal(r[0]["inputs"][0], ev.plan()[0]["inputs"][0])
    assert 0.5 * 2 ** 7 <= r[1]["inputs"][1] <= 0.5 * 2 ** 8 and 0.5 * 2 ** -8 <= r[2]["inputs"][1] <= 0.5 * 2 ** -7
    assert ("scalar", (0, 1.0)) in ev.spot_kinds


def test_full_redraw_needs_shapes_that_do_not_depend_on_values(tmp_path):
    """The ``full`` redraw feeds values up to the dtype's limit into the reference in the parent: a reference that
    reads values as sizes (bincount: its length is max + 1) would allocate by them, so ``full`` is admitted only
    where torch's fake tensors give the reference's output shapes without reading any value."""
    _, where = _plan(ADV / "problems" / "bincount16.py")
    assert not any("redraw full" in w for w in where), where
    assert any("redraw range" in w for w in where), where  # the bounded redraw still runs


def test_constant_mask_is_varied_by_its_own_rounds(tmp_path):
    """redteam6 h08: an all-True mask showed no domain and was never varied, so a kernel ignoring it passed;
    the empty/dense rounds draw a constant mask at density 1/2."""
    pr = _write(tmp_path, "const_mask", "class Model(nn.Module):\n    def forward(self, x, m):\n"
                "        return (x * m).sum(-1)\n\n\n"
                "def get_inputs():\n    return [torch.randn(32, 64), torch.ones(32, 64, dtype=torch.bool)]\n\n\n"
                "def get_init_inputs():\n    return []\n")
    ev, where = _plan(pr)
    assert "redraw empty of input tensor 1 inputs" in where, where
    r = [r for r in ev.plan() if r["where"] == "redraw empty of input tensor 1 inputs"][0]
    assert not bool(r["inputs"][1].all())


# ----------------------------------------------------------------------------- outliers

def test_outlier_transform_hand_computed_and_degenerate():
    """k elements per last-dim row set to +-(the power of two nearest factor * row rms), at random positions."""
    x = torch.tensor([[1.0, -1.0, 1.0, -1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0]])  # rms 1, 0 (-> 1), 2.5
    out = C.transform([x], "outlier", 9, 16.0)[0]
    g = torch.Generator().manual_seed(9)  # hand-computed: positions, then signs, from the transform's generator
    pos = torch.rand((3, 4), generator=g).argsort(dim=1)[:, :2]
    sgn = torch.randint(0, 2, (3, 2), generator=g) * 2 - 1
    want = x.clone()
    for r, mag in enumerate([16.0, 16.0, 32.0]):  # 16 * 2.5 = 40 -> the nearest power of two, 32
        for c in range(2):
            want[r, pos[r, c]] = mag * float(sgn[r, c])
    assert torch.equal(out, want)
    assert int((out != x).sum()) <= 6  # 2 per row, never more
    assert C.ladder("outlier", [x]) == C.OUTLIER_LADDER and C.applies("outlier", [x])
    assert not C.applies("outlier", [torch.tensor([1, 2])])
    assert torch.equal(C.transform([torch.tensor([1, 2])], "outlier", 1)[0], torch.tensor([1, 2]))  # ints untouched
    s = torch.tensor(2.0)
    assert C.transform([s], "outlier", 1)[0] is s and C.transform([torch.zeros(0, 4)], "outlier", 1)[0].numel() == 0
    h = C.transform([torch.full((2, 8), 100.0, dtype=torch.float16)], "outlier", 1, 1024.0)[0]
    assert bool(torch.isfinite(h).all()) and float(h.abs().max()) == 2.0 ** 14  # capped: 65504 / 2 -> 2^14


# ----------------------------------------------------------------------------- Python-float leaves

def test_plan_holds_a_float_leaf_to_the_precision_the_reference_computed(tmp_path):
    """redteam4 h05: a leaf read from a float32 tensor of bfloat16 inputs is held to float32 (before: the
    inputs' bfloat16); a bfloat16 step inside the reference that the float32 source hides is measured against
    the float64 reference; a reference with no float64 path keeps the widest-input rule."""
    ev = _ev(ADV / "problems" / "meansq_leaf_bf16.py")
    rounds = ev.plan()
    assert ev.leaf_dtype == {"out": "float32"}, ev.leaf_dtype
    assert {"negate", "scale_up", "outlier", "shift", "ties"} <= {r["kind"] for r in rounds}  # still admitted
    ev = _ev(ADV / "problems" / "mean_leaf.py")
    ev.plan()
    assert ev.leaf_dtype == {"out[1]": "float32"}  # float32 inputs, float32 mean: unchanged
    hidden = _write(tmp_path, "bf16_step", "class Model(nn.Module):\n    def forward(self, x):\n"
                    "        return x.sum().float().item()\n\n\n"
                    "def get_inputs():\n    return [torch.rand(64, 64, dtype=torch.bfloat16)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    ev = _ev(hidden)
    ev.plan()  # read from float32, summed into bfloat16: the float64 twin shows bfloat16 rounding
    assert ev.leaf_dtype["out"] in ("float16", "bfloat16"), ev.leaf_dtype
    cast = _write(tmp_path, "bf16_cast", "class Model(nn.Module):\n    def forward(self, x):\n"
                  "        return x.bfloat16().sum().float().item()\n\n\n"
                  "def get_inputs():\n    return [torch.rand(64, 64)]\n\n\ndef get_init_inputs():\n    return []\n")
    ev = _ev(cast)
    ev.plan()  # an explicit downcast: the twin casts too (no measured error), the cast is recorded
    assert ev.leaf_dtype == {"out": "bfloat16"}, ev.leaf_dtype
    no64 = _write(tmp_path, "no_fp64", "class Model(nn.Module):\n    def forward(self, x):\n"
                  "        assert x.dtype != torch.float64\n        return x.float().pow(2).mean().item()\n\n\n"
                  "def get_inputs():\n    return [torch.randn(64, 64, dtype=torch.bfloat16)]\n\n\n"
                  "def get_init_inputs():\n    return []\n")
    ev = _ev(no64)
    ev.plan()
    assert ev.leaf_dtype == {"out": "bfloat16"}, ev.leaf_dtype  # no float64 twin: the widest input dtype


def test_sorted_float_inputs_stay_sorted_under_every_transform():
    """redteam8 hn10: a sorted float input (bucketize's boundaries) negated or near-repeated was unsorted, where
    the reference answers anything; every transform and the near-repeat keep a monotone last dim monotone, in
    its direction; unsorted inputs are moved as before."""
    b = torch.linspace(-3, 3, 17)
    x = torch.randn(4, 33)
    down = torch.linspace(2, -2, 9)
    for name in C.TRANSFORMS:
        for f in C.ladder(name, [x, b])[:1]:
            tb, tx, td = C.transform([b, x, down], name, 7, f)
            assert bool((tb[1:] >= tb[:-1]).all()), name
            assert bool((td[1:] <= td[:-1]).all()), name
            if name not in ("int_wide",):  # an unsorted input: the transform's own values, unsorted
                assert not bool((tx[..., 1:] >= tx[..., :-1]).all())
    neg = C.transform([b], "negate", 0)[0]
    assert torch.equal(neg, torch.sort(-b).values) and torch.equal(C.transform([x], "negate", 0)[0], -x)  # hand values
    p = C.perturb([b, x], [torch.linspace(-1, 5, 17), torch.randn(4, 33)], 3)
    assert bool((p[0][1:] >= p[0][:-1]).all()) and not torch.equal(p[0], b)
    z = torch.zeros(0)
    assert C.keep_sorted([b], [z])[0] is z  # degenerate: shapes differ, untouched
    e = torch.zeros(0)
    assert C.keep_sorted(e, e) is e and C.keep_sorted(3, 4) == 4


def test_complex_inputs_get_outliers_and_offsets():
    """redteam8 h07: a softmax of |z| shifted by the max of the first 256 columns passed, because the outlier
    and shift rounds skipped complex tensors. Now: two elements per row set to the power of two nearest
    factor x the row's rms of |z| (rms 2 here: 2 * 16 = 32), at a random phase; shift adds a real offset."""
    z = torch.full((3, 300), 2.0 + 0.0j, dtype=torch.complex64)
    o = C.transform([z], "outlier", 1, 16.0)[0]
    assert o.dtype == torch.complex64 and o.shape == z.shape
    big = o.abs() > 3
    assert big.sum(1).tolist() == [2, 2, 2] and torch.allclose(o.abs()[big], torch.full((6,), 32.0))
    assert o[big].imag.abs().max() > 1  # a phase, not only the real axis
    assert torch.equal(o[~big], z[~big])
    s = C.transform([z], "shift", 1, 4.0)[0]
    assert torch.allclose((s - z).abs(), torch.full(z.shape, 8.0))  # 4 x rms 2, one sign per tensor
    assert C.applies("outlier", [z]) and C.applies("shift", [z]) and not C.applies("ties", [z])
    e = torch.zeros(0, dtype=torch.complex64)
    assert C.transform([e], "outlier", 1)[0].numel() == 0  # degenerate
