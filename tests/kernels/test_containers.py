"""Every input walker of the correctness module treats a dict like a list (redteam10 h03: a LayerNorm whose input
arrives as ``{"x": tensor}`` passed every transform unchanged, so a one-pass variance earned +3). One check per
walker, run on the same tensors flat and inside a dict: the same draws, in the same order, give the same
tensors; a walker that forgets a container kind fails here, whichever walker it is."""

import json

import pytest
import torch

from shiftkit.kernels import correctness as C


def _inputs():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 16, generator=g) + 4.0  # mean far from zero: the shift round matters
    m = torch.rand(8, 16, generator=g) < 0.5
    i = torch.randint(0, 7, (8, 4), generator=g)
    s = torch.sort(torch.randn(8, 5, generator=g), dim=-1).values  # a sorted input stays sorted
    return [x, m, i, s, 0.75, 5]


def _in_dict(xs):
    return [{"x": xs[0], "m": xs[1], "i": xs[2], "s": xs[3], "f": xs[4], "n": xs[5]}]


def _flat(tree):
    out = []

    def walk(v):
        if isinstance(v, (list, tuple)):
            for w in v:
                walk(w)
        elif isinstance(v, dict):
            for w in v.values():
                walk(w)
        else:
            out.append(v)
    walk(tree)
    return out


def _same(a, b):
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for u, v in zip(fa, fb):
        if isinstance(u, torch.Tensor):
            assert isinstance(v, torch.Tensor) and u.dtype == v.dtype and torch.equal(u, v)
        else:
            assert u == v


def _changed(a, b):
    return any(not (torch.equal(u, v) if isinstance(u, torch.Tensor) else u == v) for u, v in zip(_flat(a), _flat(b)))


@pytest.mark.parametrize("name", C.TRANSFORMS)
def test_every_transform_descends_into_dicts(name):
    flat, nested = _inputs(), _in_dict(_inputs())
    assert C.applies(name, flat) == C.applies(name, nested)
    a, b = C.transform(flat, name, 11), C.transform(nested, name, 11)
    _same(a, b)
    if C.applies(name, flat):
        assert _changed(nested, b), name  # it moved something inside the dict


def test_the_other_walkers_descend_into_dicts():
    flat, nested = _inputs(), _in_dict(_inputs())
    fresh_f, fresh_n = [t * 2 if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in flat], None
    fresh_n = _in_dict(fresh_f)
    _same(C.perturb(flat, fresh_f, 5), C.perturb(nested, fresh_n, 5))
    assert _changed(nested, C.perturb(nested, fresh_n, 5))
    assert C.discrete_targets(flat) == C.discrete_targets(nested) and C.discrete_targets(nested)
    for t in C.discrete_targets(flat):
        for v in C.redraw_variants(list(C._tensors(flat))[t]):
            _same(C.redraw(flat, t, v, 9), C.redraw(nested, t, v, 9))
    assert C.scalar_targets(flat) == C.scalar_targets(nested) == [0]
    assert C.int_targets(flat) == C.int_targets(nested) == [0]
    _same(C.rescale_scalar(flat, 0, 4), C.rescale_scalar(nested, 0, 4))
    _same(C.rescale_scalar_far(flat, 0, 4, True), C.rescale_scalar_far(nested, 0, 4, True))
    _same(C.move_int(flat, 0, 4), C.move_int(nested, 0, 4))
    assert _changed(nested, C.move_int(nested, 0, 4)) and _changed(nested, C.rescale_scalar(nested, 0, 4))
    _same(C.moved_relative(flat, torch.Generator().manual_seed(2)), C.moved_relative(nested, torch.Generator().manual_seed(2)))
    _same(C.owned_copy(flat), C.owned_copy(nested))
    for f in (C.has_float, C.has_int, C.has_int64):
        assert f(flat) == f(nested) and f(nested)
    assert C.shapes_of(flat) == C.shapes_of(nested)
    assert C.same_tensors(nested, C.owned_copy(nested))


def test_version_counters_see_an_in_place_write_that_changes_no_value():
    """redteam10 hn22: a guard ``clamp_`` on inputs already in range writes nothing new, so the values of trial 0
    said the reference was out of place, and the eager party then faulted on the read-only input region. The
    version counters see every in-place write."""
    x = torch.rand(4, 3)
    y = {"a": x.clone(), "b": [torch.zeros(2)]}
    v = C.versions(y)
    with torch.no_grad():
        y["a"].clamp_(-1.0, 2.0)
    assert C.same_tensors(y, {"a": x, "b": [torch.zeros(2)]})  # the values say nothing
    assert C.versions(y) != v and C.versions(y)[1] == v[1]
    with torch.inference_mode():
        z = torch.ones(2)
    assert C.versions([z]) == [-1]


def test_infinities_agree_by_hand():
    """redteam10 h04: a masked log-softmax is -inf where masked by design; a transformed round is well defined
    where the float32 reference holds exactly the float64 twin's infinities, and never with a NaN."""
    ninf, nan = float("-inf"), float("nan")
    e64 = torch.tensor([[0.5, ninf], [-1.0, ninf]], dtype=torch.float64)
    assert C.infinities_agree(e64.float(), e64)
    assert C.infinities_agree({"y": [e64.float()]}, {"y": [e64]})  # any container
    assert not C.infinities_agree(torch.tensor([[0.5, -3.0e38], [-1.0, ninf]]), e64)  # finite where inf
    assert not C.infinities_agree(torch.tensor([[0.5, float("inf")], [-1.0, ninf]]), e64)  # the other infinity
    assert not C.infinities_agree(e64.float(), torch.tensor([[0.5, nan], [-1.0, ninf]], dtype=torch.float64))
    assert C.infinities_agree(torch.ones(2), torch.ones(2, dtype=torch.float64))  # degenerate: nothing infinite
    assert C.infinities_agree(torch.ones(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64))
    assert C.finite_where({"y": e64.float()}, {"y": e64}) and not C.finite_where({"y": e64}, {"y": e64.float()[:1]})


def test_an_integral_float_is_moved_by_integers():
    """redteam10 h01: pow(x, 3.0) on signed inputs is real only at integral exponents; every scaling move of 3.0
    made the reference NaN, so a kernel baking in a cube passed. An integral float is also moved by +-m."""
    x = torch.randn(3)
    seen = set()
    for seed in range(20):
        out = C.move_integral([x, 3.0], 0, seed)
        assert out[0] is x and out[1] in (2.0, 4.0) and isinstance(out[1], float)
        seen.add(out[1])
    assert seen == {2.0, 4.0}  # both ways, from the seed
    assert C.move_integral([x, 0.5], 0, 1) is None and C.move_integral([x, float("inf")], 0, 1) is None
    assert C.move_integral([x, 1.0, 5.0], 1, 1)[1] == 1.0  # only the target moves
    assert abs(C.move_integral([{"p": 64.0}], 0, 2)[0]["p"] - 64.0) in range(1, 33)


def test_layouts_sent_ahead_of_a_round_hold_no_value():
    """redteam10 h10: ``shm.without_values`` takes every scalar out of a layout, in traversal order; the worker puts
    the round's values back in the same order (``worker.fill_values``), and refuses a count that does not match."""
    from shiftkit.kernels import shm, worker

    x = [torch.zeros(2, 3), 0.25, {"k": 7, "t": torch.ones(1)}, (None, "s")]
    lay, _ = shm.layout(x)
    bare, vals = shm.without_values(lay)
    assert vals == [0.25, 7, None, "s"]
    assert '"v"' not in json.dumps(bare) and '"v"' in json.dumps(lay)
    built = [torch.zeros(2, 3), worker.VALUE, {"k": worker.VALUE, "t": torch.ones(1)}, (worker.VALUE, worker.VALUE)]
    assert worker.has_value(built) and not worker.has_value([torch.zeros(1), {"a": [1.0]}])
    got = worker.fill_values(built, vals)
    assert got[1] == 0.25 and got[2]["k"] == 7 and got[3] == (None, "s") and isinstance(got[3], tuple)
    assert built[1] is worker.VALUE  # the template is kept for the next round
    with pytest.raises(ValueError):
        worker.fill_values(built, vals[:-1])
    with pytest.raises(ValueError):
        worker.fill_values(built, vals + [1])
    assert shm.without_values(shm.layout([torch.ones(2)])[0])[1] == []  # degenerate: no scalar


def test_the_inputs_a_reference_writes_are_its_output_too():
    """redteam10 h05, h09: ``evaluate.with_writes`` puts the input tensors a call wrote (version counters, in
    ``shm.tensor_leaves`` order: dict keys sorted, as layouts number them) after its output."""
    from shiftkit.kernels import shm
    from shiftkit.kernels.evaluate import with_writes, written_inputs

    xs = [{"b": torch.zeros(2), "a": torch.ones(3)}, torch.full((2,), 5.0)]
    assert [t.numel() for t in shm.tensor_leaves(xs)] == [3, 2, 2]  # "a" before "b"
    before = C.versions(shm.tensor_leaves(xs))
    with torch.no_grad():
        xs[0]["b"].add_(1.0)
        xs[1].clamp_(0.0, 9.0)  # a write that changes no value still counts
    idx = written_inputs(before, xs)
    assert idx == [1, 2]
    out = with_writes(None, xs, idx)
    assert out[0] is None and out[1][0] is xs[0]["b"] and out[1][1] is xs[1]
    assert with_writes("y", xs, []) == "y"  # degenerate: nothing written, the output as it is
    assert written_inputs(C.versions(shm.tensor_leaves(xs)), xs) == []


def test_every_write_is_an_output_unless_returned_whole():
    """redteam11 h01/h04 against redteam10 hn22: ``evaluate.output_writes`` keeps every written input, a guard
    ``clamp_`` that changes no value here too (it does on scaled-up inputs, and a kernel skipping its write-back
    differs there), but one the output returns whole (compared as that output: redteam9 hn01, ``return x``); a
    partial view returned does not cover the write (redteam11 h02: ``return qkv.narrow(...)``)."""
    from shiftkit.kernels import shm
    from shiftkit.kernels.evaluate import output_writes, returns_whole

    xs = [torch.full((3, 4), 2.0), torch.full((2,), 5.0), torch.ones(2)]
    before = C.versions(shm.tensor_leaves(xs))
    with torch.no_grad():
        xs[0].zero_()  # changes values: an output
        xs[1].clamp_(0.0, 9.0)  # a guard: written, no value changed: an output all the same
    assert output_writes(before, xs) == [0, 1]
    assert output_writes(before, xs, (torch.ones(1), [xs[0]])) == [1]  # returned whole: compared as the output
    assert output_writes(before, xs, xs[0].view(-1)) == [1] and output_writes(before, xs, xs[0].t()) == [1]
    assert output_writes(before, xs, xs[0][1:]) == [0, 1]  # a part of it: the whole write is compared too
    assert output_writes(before, xs, xs[0][:, :2]) == [0, 1]
    assert output_writes(C.versions(shm.tensor_leaves(xs)), xs) == []  # degenerate: no write
    b = torch.zeros(4, 6)
    assert returns_whole(b, b) and not returns_whole(b[:, ::2], b[:, ::2])  # a strided input has holes: compared
    assert not returns_whole(b.view(torch.int32), b)  # another dtype over the same bytes is not the same tensor


def test_the_positional_parameters_read_off_a_solution_are_the_functions_own():
    """redteam10 hn02: ``load_c("spow_c", None, {"spow.c": SRC})`` names ``sources`` by position, and the extractor's
    list (name, source, extra_cflags, ...) read the dict as compiler flags (``build_flag`` for an honest call). The
    lists are checked against the signatures they mirror (torch.utils.cpp_extension.load_inline, runtime.load_c)."""
    import inspect

    from torch.utils.cpp_extension import load_inline

    from shiftkit.kernels import runtime, specs

    assert specs._LOAD_C_POS == list(inspect.signature(runtime.load_c).parameters)
    inline = list(inspect.signature(load_inline).parameters)
    assert specs._LOAD_INLINE_POS == inline[:len(specs._LOAD_INLINE_POS)]
    got, findings = specs.extract_specs('from shiftkit.kernels.runtime import load_c\n'
                                        'SRC = "int f(void) { return 1; }"\n'
                                        'lib = load_c("spow_c", None, {"spow.c": SRC}, ["-O2"])\n')
    assert not [f for f in findings if f.severity == "error"], findings
    assert got[0].sources == {"spow.c": "int f(void) { return 1; }"} and got[0].extra_cflags == ["-O2"]
